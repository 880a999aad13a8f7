package jobs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// whEnv is a fresh database with a River client working the webhooks
// queue, and one account.
type whEnv struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	keyring *secretbox.Keyring
	account uuid.UUID
}

func loopbackGuard(t *testing.T) *netguard.Guard {
	g, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(t, err)
	return g
}

func newWHEnv(t *testing.T, adjust func(*Deps)) *whEnv {
	t.Helper()
	return newWHEnvWith(t, adjust, Options{Concurrency: 10, Queues: []string{queues.Webhooks}})
}

// newWHEnvWith is newWHEnv with the River client's options.
func newWHEnvWith(t *testing.T, adjust func(*Deps), opts Options) *whEnv {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	deps := Deps{
		Pool:          pool,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Keyring:       keyring,
		WebhookClient: webhook.NewClient(loopbackGuard(t), webhook.ClientOptions{}),
	}
	if adjust != nil {
		adjust(&deps)
	}
	client, err := NewClient(deps, opts)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	account := uuid.Must(uuid.NewV7())
	_, err = pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, account.String()+"@example.com")
	require.NoError(t, err)
	return &whEnv{pool: pool, client: client, keyring: keyring, account: account}
}

// subscribe stores a subscription the way the API does (secret sealed and
// bound to the row id).
func (e *whEnv) subscribe(t *testing.T, url, secret string, adjust func(*dbsqlc.SubscriptionInsertParams)) uuid.UUID {
	t.Helper()
	p := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: e.account, URL: url}
	ct, kid, err := e.keyring.Seal([]byte(secret), p.ID[:])
	require.NoError(t, err)
	p.SecretCiphertext, p.SecretKeyID = ct, kid
	if adjust != nil {
		adjust(&p)
	}
	_, err = dbsqlc.New().SubscriptionInsert(context.Background(), e.pool, p)
	require.NoError(t, err)
	return p.ID
}

func messageEvent(account uuid.UUID) events.Event {
	return events.Event{AccountID: account, Type: events.TypeReceiverMessageReceived, Payload: map[string]any{
		"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email",
	}}
}

func healthEvent(account uuid.UUID, domain string, tags ...string) events.Event {
	return events.Event{AccountID: account, Type: events.TypeHealthScoreChanged, Domain: domain, Tags: tags,
		Payload: map[string]any{"domain": domain, "previous_score": 80, "score": 70, "delta": -10}}
}

func (e *whEnv) emit(t *testing.T, ev events.Event) dbsqlc.Event {
	t.Helper()
	row, err := dbutil.WithTxV(context.Background(), e.pool, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Event, error) {
		return (&events.Emitter{River: e.client}).Emit(ctx, tx, ev)
	})
	require.NoError(t, err)
	return row
}

func (e *whEnv) deliveriesOf(t *testing.T, eventID uuid.UUID) []dbsqlc.WebhookDelivery {
	t.Helper()
	rows, err := dbsqlc.New().DeliveryList(context.Background(), e.pool, dbsqlc.DeliveryListParams{AccountID: e.account, EventID: &eventID, Max: 100})
	require.NoError(t, err)
	return rows
}

// only returns the single delivery of an event.
func (e *whEnv) only(t *testing.T, eventID uuid.UUID) dbsqlc.WebhookDelivery {
	t.Helper()
	rows := e.deliveriesOf(t, eventID)
	require.Len(t, rows, 1)
	return rows[0]
}

// waitFor polls the delivery until cond holds (bounded).
func (e *whEnv) waitFor(t *testing.T, id uuid.UUID, what string, cond func(dbsqlc.WebhookDelivery) bool) dbsqlc.WebhookDelivery {
	t.Helper()
	var d dbsqlc.WebhookDelivery
	require.Eventually(t, func() bool {
		var err error
		d, err = dbsqlc.New().DeliveryGetByID(context.Background(), e.pool, dbsqlc.DeliveryGetByIDParams{ID: id, AccountID: e.account})
		require.NoError(t, err)
		return cond(d)
	}, 60*time.Second, 10*time.Millisecond, "delivery never became %s", what)
	return d
}

// settled waits until the delivery's job is no longer running: River
// records a job's outcome just after Work returns, a moment after the row.
func (e *whEnv) settled(t *testing.T, d dbsqlc.WebhookDelivery) *rivertype.JobRow {
	t.Helper()
	var j *rivertype.JobRow
	require.Eventually(t, func() bool {
		j = e.job(t, *d.JobID)
		return j.State != rivertype.JobStateRunning
	}, 10*time.Second, 5*time.Millisecond)
	return j
}

func statusIs(status string, attempts int32) func(dbsqlc.WebhookDelivery) bool {
	return func(d dbsqlc.WebhookDelivery) bool {
		// A retrying delivery has its next time once its attempt is over.
		return d.Status == status && d.Attempts == attempts && (status != deliveries.StatusRetrying || d.NextRetryAt != nil)
	}
}

func (e *whEnv) job(t *testing.T, id int64) *rivertype.JobRow {
	t.Helper()
	j, err := e.client.JobGet(context.Background(), id)
	require.NoError(t, err)
	return j
}

func (e *whEnv) attempts(t *testing.T, id uuid.UUID) []dbsqlc.WebhookDeliveryAttempt {
	t.Helper()
	rows, err := dbsqlc.New().DeliveryAttemptListByDelivery(context.Background(), e.pool, id)
	require.NoError(t, err)
	return rows
}

func (e *whEnv) countEvents(t *testing.T, typ string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2", e.account, typ).Scan(&n))
	return n
}

// receiver is a real HTTP endpoint on loopback that records every request
// and answers with respond (200 when nil).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []receivedReq
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

type receivedReq struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, receivedReq{header: r.Header.Clone(), body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []receivedReq {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedReq(nil), rc.got...)
}

// verify checks every request's signature with the official Standard
// Webhooks library and that all carry msgID and the same body.
func (rc *receiver) verify(t *testing.T, secret, msgID string, body []byte) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	reqs := rc.requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.NoError(t, wh.Verify(r.body, r.header), "signature must verify")
		require.Equal(t, msgID, r.header.Get("webhook-id"), "webhook-id is the delivery id on every attempt")
		require.Equal(t, body, r.body, "every attempt sends the stored bytes")
	}
}

func TestDeliveryWorker(t *testing.T) {
	t.Parallel()

	t.Run("Delivered2xxGeneratedSecret", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, nil)
		secret := webhook.GenerateSecret()
		e.subscribe(t, rc.URL, secret, nil)
		ev := e.emit(t, messageEvent(e.account))
		d := e.only(t, ev.ID)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
		require.NotNil(t, d.DeliveredAt)
		require.Nil(t, d.NextRetryAt)
		require.EqualValues(t, 200, *d.LastStatusCode)
		rc.verify(t, secret, d.ID.String(), d.Body)
		require.Equal(t, rivertype.JobStateCompleted, e.settled(t, d).State)
		atts := e.attempts(t, d.ID)
		require.Len(t, atts, 1)
		require.NotNil(t, atts[0].FinishedAt)
		require.True(t, atts[0].Counted)
		// The body is the Standard Webhooks envelope around the event.
		require.Contains(t, string(d.Body), `"type":"receiver_message_received"`)
		require.Contains(t, string(d.Body), `"id":"`+ev.ID.String()+`"`)
	})

	t.Run("ServerErrorThenSuccessSuppliedSecret", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				w.WriteHeader(500)
				_, _ = w.Write([]byte("boom"))
				return
			}
			w.WriteHeader(204)
		})
		secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		e.subscribe(t, rc.URL, secret, nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		require.EqualValues(t, 500, *d.LastStatusCode)
		require.Equal(t, webhook.ErrorClassHTTPStatus, *d.LastErrorClass)
		// next_retry_at is exactly when River will run the job, about 5 s on.
		job := e.settled(t, d)
		// River makes a retry due within seconds "available" at once (with
		// its scheduled_at), a later one "retryable".
		require.Contains(t, []rivertype.JobState{rivertype.JobStateRetryable, rivertype.JobStateAvailable}, job.State)
		require.NotNil(t, d.NextRetryAt)
		require.True(t, d.NextRetryAt.Equal(job.ScheduledAt), "next_retry_at %v, River %v", d.NextRetryAt, job.ScheduledAt)
		require.WithinDuration(t, time.Now().Add(5*time.Second), *d.NextRetryAt, 1500*time.Millisecond)
		require.Equal(t, "boom", *e.attempts(t, d.ID)[0].ResponseBody)
		// Hurry the retry as River UI would.
		_, err := e.client.JobRetry(context.Background(), job.ID)
		require.NoError(t, err)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 2))
		require.Len(t, rc.requests(), 2)
		rc.verify(t, secret, d.ID.String(), d.Body)
		require.EqualValues(t, 10, d.MaxAttempts)
	})

	t.Run("ExhaustionFailsAndEmitsFailureEvent", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) })
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) {
			p.EventTypes = []string{events.TypeReceiverMessageReceived}
		})
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		for n := int32(1); n < webhook.MaxAttempts; n++ {
			d = e.waitFor(t, d.ID, "retrying", statusIs(deliveries.StatusRetrying, n))
			job := e.settled(t, d)
			require.True(t, d.NextRetryAt.Equal(job.ScheduledAt), "attempt %d: next_retry_at %v, River %v", n, d.NextRetryAt, job.ScheduledAt)
			require.WithinDuration(t, time.Now().Add(webhook.BaseDelay(int(n))), *d.NextRetryAt, webhook.BaseDelay(int(n))/10+2*time.Second)
			_, err := e.client.JobRetry(context.Background(), job.ID)
			require.NoError(t, err)
		}
		d = e.waitFor(t, d.ID, "failed", statusIs(deliveries.StatusFailed, webhook.MaxAttempts))
		require.Nil(t, d.NextRetryAt)
		require.EqualValues(t, webhook.MaxAttempts, d.MaxAttempts)
		require.Eventually(t, func() bool { return e.job(t, *d.JobID).State == rivertype.JobStateDiscarded }, 5*time.Second, 10*time.Millisecond)
		require.Len(t, rc.requests(), webhook.MaxAttempts)
		require.Equal(t, 1, e.countEvents(t, events.TypeWebhookDeliveryFailed))
		var payload []byte
		require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT payload FROM events WHERE event_type = $1", events.TypeWebhookDeliveryFailed).Scan(&payload))
		require.Contains(t, string(payload), d.ID.String())
		require.Contains(t, string(payload), `"last_status_code": 502`)
	})

	t.Run("GoneDisablesSubscriptionWithoutCascade", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(410) })
		sub := e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		// A delivery of a webhook_delivery_failed event that fails emits
		// no further webhook_delivery_failed.
		ev := e.emit(t, events.Event{AccountID: e.account, Type: events.TypeWebhookDeliveryFailed, Payload: map[string]any{
			"delivery_id": uuid.New(), "subscription_id": uuid.New(), "event_id": uuid.New(), "event_type": "bounce_spike", "attempts": 10,
		}})
		d := e.only(t, ev.ID)
		d = e.waitFor(t, d.ID, "failed", statusIs(deliveries.StatusFailed, 1))
		require.EqualValues(t, 410, *d.LastStatusCode)
		require.Eventually(t, func() bool { return e.job(t, *d.JobID).State == rivertype.JobStateCancelled }, 5*time.Second, 10*time.Millisecond)
		s, err := dbsqlc.New().SubscriptionGetForDelivery(context.Background(), e.pool, sub)
		require.NoError(t, err)
		require.False(t, s.Enabled)
		require.Contains(t, *s.DisabledReason, "410")
		require.Equal(t, 1, e.countEvents(t, events.TypeSubscriptionDisabled))
		require.Equal(t, 1, e.countEvents(t, events.TypeWebhookDeliveryFailed), "only the emitted one: no cascade")
		// The subscription_disabled event is not pushed to the disabled
		// subscription.
		disabled, err := e.pool.Query(context.Background(), "SELECT id FROM events WHERE event_type = $1", events.TypeSubscriptionDisabled)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(disabled, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		require.Empty(t, e.deliveriesOf(t, ids[0]))
		require.Len(t, rc.requests(), 1)
	})

	t.Run("RetryAfterSnoozesWithoutUsingAnAttempt", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(429)
				return
			}
			w.WriteHeader(200)
		})
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
		atts := e.attempts(t, d.ID)
		require.Len(t, atts, 2)
		require.False(t, atts[0].Counted)
		require.EqualValues(t, 429, *atts[0].StatusCode)
		require.True(t, atts[1].Counted)
		require.GreaterOrEqual(t, atts[1].StartedAt.Sub(*atts[0].FinishedAt), 900*time.Millisecond, "snoozed for Retry-After")
		job := e.job(t, *d.JobID)
		require.Equal(t, 1, job.Attempt, "the snooze did not use a River attempt")
	})

	t.Run("TimeoutIsAFailedAttempt", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, func(d *Deps) {
			d.WebhookClient = webhook.NewClient(loopbackGuard(t), webhook.ClientOptions{Timeout: 300 * time.Millisecond})
		})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		})
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		require.Equal(t, webhook.ErrorClassTimeout, *d.LastErrorClass)
		require.Nil(t, d.LastStatusCode)
	})

	t.Run("RedirectNotFollowed", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		target := newReceiver(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusFound)
		})
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		require.Equal(t, webhook.ErrorClassRedirect, *d.LastErrorClass)
		require.EqualValues(t, 302, *d.LastStatusCode)
		require.Empty(t, target.requests(), "the redirect target is never called")
	})

	t.Run("PrivateAddressRefusedWithoutAllowList", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, func(d *Deps) {
			d.WebhookClient = webhook.NewClient(netguard.NewGuard(nil), webhook.ClientOptions{})
		})
		rc := newReceiver(t, nil)
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) {
			p.EventTypes = []string{events.TypeReceiverMessageReceived}
		})
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "failed", statusIs(deliveries.StatusFailed, 1))
		require.Equal(t, webhook.ErrorClassBlockedDestination, *d.LastErrorClass)
		require.Empty(t, rc.requests())
		require.Eventually(t, func() bool { return e.job(t, *d.JobID).State == rivertype.JobStateCancelled }, 5*time.Second, 10*time.Millisecond)
		require.Equal(t, 1, e.countEvents(t, events.TypeWebhookDeliveryFailed))
	})

	t.Run("RiverJobRetryOnFailedDeliveryConverges", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				w.WriteHeader(410)
				return
			}
			w.WriteHeader(200)
		})
		sub := e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) {
			p.EventTypes = []string{events.TypeReceiverMessageReceived}
		})
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "failed", statusIs(deliveries.StatusFailed, 1))
		require.Eventually(t, func() bool { return e.job(t, *d.JobID).State == rivertype.JobStateCancelled }, 5*time.Second, 10*time.Millisecond)
		// The account re-enables the subscription; an operator retries the
		// cancelled job in River UI (or `mailwatch jobs retry`).
		_, err := e.pool.Exec(context.Background(), "UPDATE event_subscriptions SET enabled = true, disabled_reason = NULL WHERE id = $1", sub)
		require.NoError(t, err)
		_, err = e.client.JobRetry(context.Background(), *d.JobID)
		require.NoError(t, err)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 2))
		require.Nil(t, d.FailedAt)
		job := e.settled(t, d)
		require.Equal(t, rivertype.JobStateCompleted, job.State)
		require.Equal(t, 2, job.Attempt)
		require.EqualValues(t, job.MaxAttempts, d.MaxAttempts, "the row's ceiling follows the job's")
	})

	t.Run("OperatorRetryOfACompletedJobPushesAgain", func(t *testing.T) {
		// River UI users retry a completed job to send it again.
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, nil)
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
		require.Equal(t, rivertype.JobStateCompleted, e.settled(t, d).State)
		_, err := e.client.JobRetry(context.Background(), *d.JobID)
		require.NoError(t, err)
		d = e.waitFor(t, d.ID, "delivered again", statusIs(deliveries.StatusDelivered, 2))
		reqs := rc.requests()
		require.Len(t, reqs, 2, "the retry pushes again")
		require.Equal(t, reqs[0].header.Get("webhook-id"), reqs[1].header.Get("webhook-id"), "with the same webhook-id")
		require.Len(t, e.attempts(t, d.ID), 2)
	})

	t.Run("RescuedRunOfADeliveredJobDoesNotPushAgain", func(t *testing.T) {
		// The push is recorded before River marks the job completed; a
		// process dying in between leaves a delivered row whose job the
		// rescuer queues again, recording "Stuck job rescued by JobRescuer"
		// as the lost attempt's error. That run completes without a second
		// push and says why in its output.
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, nil)
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		d := e.only(t, e.emit(t, messageEvent(e.account)).ID)
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
		require.Equal(t, rivertype.JobStateCompleted, e.settled(t, d).State)
		_, err := e.pool.Exec(context.Background(), `UPDATE river_job SET state = 'available', scheduled_at = now(), finalized_at = NULL,
			errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', 'Stuck job rescued by JobRescuer', 'trace', ''))
			WHERE id = $1`, *d.JobID)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			j := e.job(t, *d.JobID)
			return j.State == rivertype.JobStateCompleted && j.Attempt == 2
		}, 10*time.Second, 10*time.Millisecond)
		require.Len(t, rc.requests(), 1, "no second push")
		require.Len(t, e.attempts(t, d.ID), 1, "no second attempt")
		d = e.waitFor(t, d.ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
		out := e.job(t, *d.JobID).Output()
		require.Contains(t, string(out), deliveries.SkipAlreadyDelivered)
	})

	t.Run("BurstIsRecordedPerDelivery", func(t *testing.T) {
		// Many runs at once go through the coalesced statements: each
		// delivery must still get exactly its own attempt and outcome.
		t.Parallel()
		e := newWHEnv(t, nil)
		var n atomic.Int32
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200 + int(n.Add(1)%4)) // 200..203: one per delivery
			_, _ = io.WriteString(w, r.Header.Get("webhook-id"))
		})
		sub := e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		const burst = 120
		ids := make([]uuid.UUID, 0, burst)
		_, err := dbutil.WithTxV(context.Background(), e.pool, func(ctx context.Context, tx pgx.Tx) (int, error) {
			for range burst {
				ev, err := (&events.Emitter{River: e.client}).Emit(ctx, tx, messageEvent(e.account))
				if err != nil {
					return 0, err
				}
				ids = append(ids, ev.ID)
			}
			return 0, nil
		})
		require.NoError(t, err)
		for _, evID := range ids {
			d := e.waitFor(t, e.only(t, evID).ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
			atts := e.attempts(t, d.ID)
			require.Len(t, atts, 1)
			a := atts[0]
			require.NotNil(t, a.FinishedAt)
			require.NotNil(t, a.StatusCode)
			require.Equal(t, *d.LastStatusCode, *a.StatusCode, "the row and its attempt agree")
			require.NotNil(t, a.ResponseBody)
			require.Equal(t, d.ID.String(), *a.ResponseBody, "each attempt holds its own response")
			require.Equal(t, *d.JobID, *a.JobID)
		}
		var lastSuccess *time.Time
		require.NoError(t, e.pool.QueryRow(context.Background(),
			"SELECT last_success_at FROM event_subscriptions WHERE id = $1", sub).Scan(&lastSuccess))
		require.NotNil(t, lastSuccess)
	})

	t.Run("ReconcilerFailsRowsOfJobsCancelledOutsideTheAPI", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) {
			p.EventTypes = []string{events.TypeReceiverMessageReceived}
		})
		cancelled := e.waitFor(t, e.only(t, e.emit(t, messageEvent(e.account)).ID).ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		deleted := e.waitFor(t, e.only(t, e.emit(t, messageEvent(e.account)).ID).ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		rescheduled := e.waitFor(t, e.only(t, e.emit(t, messageEvent(e.account)).ID).ID, "retrying", statusIs(deliveries.StatusRetrying, 1))
		for _, d := range []dbsqlc.WebhookDelivery{cancelled, deleted, rescheduled} {
			e.settled(t, d)
		}
		ctx := context.Background()
		_, err := e.client.JobCancel(ctx, *cancelled.JobID)
		require.NoError(t, err)
		_, err = e.client.JobDelete(ctx, *deleted.JobID)
		require.NoError(t, err)
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		_, err = e.pool.Exec(ctx, "UPDATE river_job SET scheduled_at = $2 WHERE id = $1", *rescheduled.JobID, later)
		require.NoError(t, err)

		n, err := deliveries.Reconcile(ctx, e.pool, &events.Emitter{River: e.client}, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, 3, n)
		get := func(id uuid.UUID) dbsqlc.WebhookDelivery {
			d, err := dbsqlc.New().DeliveryGetByID(ctx, e.pool, dbsqlc.DeliveryGetByIDParams{ID: id, AccountID: e.account})
			require.NoError(t, err)
			return d
		}
		require.Equal(t, deliveries.StatusFailed, get(cancelled.ID).Status)
		require.Equal(t, deliveries.ErrorClassJobCancelled, *get(cancelled.ID).LastErrorClass)
		require.Equal(t, deliveries.StatusFailed, get(deleted.ID).Status)
		require.Equal(t, deliveries.ErrorClassJobGone, *get(deleted.ID).LastErrorClass)
		require.Equal(t, deliveries.StatusRetrying, get(rescheduled.ID).Status)
		require.True(t, get(rescheduled.ID).NextRetryAt.Equal(later))
		require.Equal(t, 2, e.countEvents(t, events.TypeWebhookDeliveryFailed))
		// Nothing left to repair.
		n, err = deliveries.Reconcile(ctx, e.pool, &events.Emitter{River: e.client}, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestFanOut(t *testing.T) {
	t.Parallel()

	t.Run("FiltersByTypeDomainAndTag", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, nil)
		all := e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		byType := e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) {
			p.EventTypes = []string{events.TypeHealthScoreChanged}
		})
		domain := "example.com"
		byDomain := e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) { p.DomainFilter = &domain })
		tag := "prod"
		byTag := e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) { p.TagFilter = &tag })
		disabled := e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		_, err := e.pool.Exec(context.Background(), "UPDATE event_subscriptions SET enabled = false WHERE id = $1", disabled)
		require.NoError(t, err)
		// Another account's subscription never matches.
		otherAccount := uuid.Must(uuid.NewV7())
		_, err = e.pool.Exec(context.Background(), "INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'other@example.com', 'x')", otherAccount)
		require.NoError(t, err)
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) { p.AccountID = otherAccount })

		subsOf := func(ev dbsqlc.Event) []uuid.UUID {
			var out []uuid.UUID
			for _, d := range e.deliveriesOf(t, ev.ID) {
				out = append(out, d.SubscriptionID)
			}
			return out
		}
		require.ElementsMatch(t, []uuid.UUID{all, byType, byDomain, byTag}, subsOf(e.emit(t, healthEvent(e.account, "example.com", "prod", "eu"))))
		require.ElementsMatch(t, []uuid.UUID{all, byType}, subsOf(e.emit(t, healthEvent(e.account, "example.org", "staging"))))
		require.ElementsMatch(t, []uuid.UUID{all, byType, byDomain}, subsOf(e.emit(t, healthEvent(e.account, "example.com"))))
		require.ElementsMatch(t, []uuid.UUID{all}, subsOf(e.emit(t, messageEvent(e.account))))
	})

	t.Run("NothingEnqueuedForARolledBackEvent", func(t *testing.T) {
		t.Parallel()
		e := newWHEnv(t, nil)
		rc := newReceiver(t, nil)
		e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
		ctx := context.Background()
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		ev, err := (&events.Emitter{River: e.client}).Emit(ctx, tx, messageEvent(e.account))
		require.NoError(t, err)
		var inTx int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", ev.ID).Scan(&inTx))
		require.Equal(t, 1, inTx, "the delivery exists inside the emitting transaction")
		require.NoError(t, tx.Rollback(ctx))
		var deliveries, jobs int
		require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM webhook_deliveries").Scan(&deliveries))
		require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = $1", events.DeliveryKind).Scan(&jobs))
		require.Zero(t, deliveries)
		require.Zero(t, jobs)
		require.Empty(t, rc.requests())
	})
}
