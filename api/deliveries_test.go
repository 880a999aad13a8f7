package api_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

type deliveryJSON struct {
	ID             string     `json:"id"`
	SubscriptionID string     `json:"subscription_id"`
	EventID        string     `json:"event_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	MaxAttempts    int        `json:"max_attempts"`
	LastStatusCode *int       `json:"last_status_code"`
	NextRetryAt    *time.Time `json:"next_retry_at"`
	AttemptLog     []struct {
		StatusCode *int `json:"status_code"`
		Counted    bool `json:"counted"`
	} `json:"attempt_log"`
}

// webhookBundle is an API on a committed database with a River worker
// client pushing deliveries, as `mailwatch worker --queues=webhooks` does.
type webhookBundle struct {
	*testBundle
	worker *river.Client[pgx.Tx]
}

func setupWebhooks(t *testing.T) *webhookBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32)) // the harness's key
	require.NoError(t, err)
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keyring: keyring,
		WebhookClient: webhook.NewClient(testGuard(t), webhook.ClientOptions{}),
	}, jobs.Options{Concurrency: 10, Queues: []string{queues.Webhooks}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(ctx)
	})
	return &webhookBundle{testBundle: b, worker: worker}
}

func (b *webhookBundle) start(t *testing.T) {
	require.NoError(t, b.worker.Start(context.Background()))
}

// emitMessage emits an event for the account as a producer would.
func (b *webhookBundle) emitMessage(t *testing.T, account string) string {
	t.Helper()
	ev, err := dbutil.WithTxV(context.Background(), b.db, func(ctx context.Context, tx pgx.Tx) (uuid.UUID, error) {
		row, err := (&events.Emitter{River: b.worker}).Emit(ctx, tx, events.Event{
			AccountID: uuid.MustParse(account), Type: events.TypeReceiverMessageReceived,
			Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"},
		})
		return row.ID, err
	})
	require.NoError(t, err)
	return ev.String()
}

func (b *webhookBundle) deliveryOf(t *testing.T, key, eventID string) deliveryJSON {
	t.Helper()
	resp := b.do(t, "GET", "/api/accounts/me/deliveries?event_id="+eventID, key, nil)
	require.Equal(t, 200, resp.Status, "%s", resp.Body)
	var list []deliveryJSON
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	return list[0]
}

func (b *webhookBundle) waitDelivery(t *testing.T, key, id string, cond func(deliveryJSON) bool) deliveryJSON {
	t.Helper()
	var d deliveryJSON
	require.Eventually(t, func() bool {
		resp := b.do(t, "GET", "/api/accounts/me/deliveries/"+id, key, nil)
		require.Equal(t, 200, resp.Status)
		resp.JSON(t, &d)
		return cond(d)
	}, 20*time.Second, 20*time.Millisecond, "last: %+v", d)
	return d
}

// jobSettled waits until no job of the delivery is running or due now.
func (b *webhookBundle) jobSettled(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT count(*) FROM river_job j JOIN webhook_deliveries d ON d.job_id = j.id
			WHERE d.id = $1 AND (j.state = 'running' OR (j.state = 'available' AND j.scheduled_at <= now()))`, id).Scan(&n))
		return n == 0
	}, 10*time.Second, 5*time.Millisecond)
}

func is(status string, attempts int) func(deliveryJSON) bool {
	return func(d deliveryJSON) bool {
		return d.Status == status && d.Attempts == attempts && (status != "retrying" || d.NextRetryAt != nil)
	}
}

func TestDeliveriesListAndGet(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	b.start(t)
	acct := b.createAccount(t)
	rc := newHookReceiver(t, nil)
	sub := createSub(t, b.testBundle, acct.Key, map[string]any{"url": rc.URL})
	var eventIDs []string
	for range 3 {
		eventIDs = append(eventIDs, b.emitMessage(t, acct.ID))
	}
	for _, ev := range eventIDs {
		d := b.deliveryOf(t, acct.Key, ev)
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 1))
	}

	resp := b.do(t, "GET", "/api/accounts/me/deliveries?status=delivered&limit=2", acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	var page []deliveryJSON
	resp.JSON(t, &page)
	require.Len(t, page, 2)
	require.Equal(t, eventIDs[2], page[0].EventID, "newest first")
	cursor := resp.Header.Get("X-Next-Cursor")
	require.NotEmpty(t, cursor)
	require.Contains(t, resp.Header.Get("Link"), "cursor="+cursor)
	resp = b.do(t, "GET", "/api/accounts/me/deliveries?status=delivered&limit=2&cursor="+cursor, acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	resp.JSON(t, &page)
	require.Len(t, page, 1)
	require.Equal(t, eventIDs[0], page[0].EventID)
	require.Empty(t, resp.Header.Get("X-Next-Cursor"))

	resp = b.do(t, "GET", "/api/accounts/me/deliveries?subscription_id="+sub.ID, acct.Key, nil)
	resp.JSON(t, &page)
	require.Len(t, page, 3)
	resp = b.do(t, "GET", "/api/accounts/me/deliveries?status=failed", acct.Key, nil)
	resp.JSON(t, &page)
	require.Empty(t, page)
	resp = b.do(t, "GET", "/api/accounts/me/deliveries?subscription_id="+uuid.NewString(), acct.Key, nil)
	resp.JSON(t, &page)
	require.Empty(t, page)

	for _, q := range []string{"status=bogus", "limit=0", "limit=201", "cursor=nope"} {
		resp = b.do(t, "GET", "/api/accounts/me/deliveries?"+q, acct.Key, nil)
		require.Equal(t, 422, resp.Status, "%s: %s", q, resp.Body)
	}
	require.Equal(t, 400, b.do(t, "GET", "/api/accounts/me/deliveries?event_id=x", acct.Key, nil).Status)

	d := b.deliveryOf(t, acct.Key, eventIDs[1])
	resp = b.do(t, "GET", "/api/accounts/me/deliveries/"+d.ID, acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	var detail deliveryJSON
	resp.JSON(t, &detail)
	require.Len(t, detail.AttemptLog, 1)
	require.Equal(t, 200, *detail.AttemptLog[0].StatusCode)
	require.Equal(t, 10, detail.MaxAttempts)

	other := b.createAccount(t)
	require.Equal(t, 404, b.do(t, "GET", "/api/accounts/me/deliveries/"+d.ID, other.Key, nil).Status)
	require.Equal(t, 404, b.do(t, "POST", "/api/accounts/me/deliveries/"+d.ID+"/retry", other.Key, nil).Status)
	resp = b.do(t, "GET", "/api/accounts/me/deliveries", other.Key, nil)
	resp.JSON(t, &page)
	require.Empty(t, page)
}

func TestDeliveryManualRetry(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	acct := b.createAccount(t)
	var code atomic.Int32
	code.Store(200)
	rc := newHookReceiver(t, func(int) int { return int(code.Load()) })
	sub := createSub(t, b.testBundle, acct.Key, map[string]any{"url": rc.URL, "event_types": []string{"receiver_message_received"}})
	retry := func(id string) response {
		return b.do(t, "POST", "/api/accounts/me/deliveries/"+id+"/retry", acct.Key, nil)
	}

	// Pending: queued, no worker yet.
	pending := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
	require.Equal(t, "pending", pending.Status)
	resp := retry(pending.ID)
	require.Equal(t, 409, resp.Status)
	require.Contains(t, resp.Detail(t), "queued")
	resp = b.do(t, "GET", "/api/accounts/me/dashboard-summary", acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	var dash struct {
		Deliveries struct{ Pending, Retrying, Failed int } `json:"deliveries"`
	}
	resp.JSON(t, &dash)
	require.Equal(t, 1, dash.Deliveries.Pending)

	b.start(t)
	b.waitDelivery(t, acct.Key, pending.ID, is("delivered", 1))

	t.Run("Running", func(t *testing.T) {
		block := make(chan struct{})
		rc.mu.Lock()
		rc.block = block
		rc.mu.Unlock()
		before := rc.count()
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		require.Eventually(t, func() bool { return rc.count() > before }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, 409, retry(d.ID).Status, "an attempt is in flight")
		rc.mu.Lock()
		rc.block = nil
		rc.mu.Unlock()
		close(block)
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 1))
	})

	t.Run("Retrying", func(t *testing.T) {
		code.Store(500)
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		d = b.waitDelivery(t, acct.Key, d.ID, is("retrying", 1))
		require.True(t, d.NextRetryAt.After(time.Now()))
		b.jobSettled(t, d.ID)
		code.Store(200)
		resp := retry(d.ID)
		require.Equal(t, 202, resp.Status, "%s", resp.Body)
		var queued deliveryJSON
		resp.JSON(t, &queued)
		require.Equal(t, "retrying", queued.Status)
		require.WithinDuration(t, time.Now(), *queued.NextRetryAt, 2*time.Second, "runs now, not in 5 s")
		d = b.waitDelivery(t, acct.Key, d.ID, is("delivered", 2))
		require.Equal(t, 10, d.MaxAttempts, "the next scheduled attempt, run now: no extra attempt")
	})

	t.Run("Delivered", func(t *testing.T) {
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 1))
		b.jobSettled(t, d.ID)
		before := rc.count()
		resp := retry(d.ID)
		require.Equal(t, 202, resp.Status, "%s", resp.Body)
		d = b.waitDelivery(t, acct.Key, d.ID, is("delivered", 2))
		require.Equal(t, 2, d.MaxAttempts, "one extra attempt")
		require.Equal(t, before+1, rc.count())
		h, _ := rc.last()
		require.Equal(t, d.ID, h.Get("webhook-id"), "the redelivery keeps the webhook-id")
	})

	t.Run("DeliveredWhileItsJobCompletes", func(t *testing.T) {
		// River marks a job completed a moment after its push is recorded
		// delivered. A retry in that moment has nothing in flight to wait
		// for: it is accepted, not refused as running.
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 1))
		b.jobSettled(t, d.ID)
		_, err := b.db.Exec(context.Background(), `UPDATE river_job SET state = 'running', finalized_at = NULL
			WHERE id = (SELECT job_id FROM webhook_deliveries WHERE id = $1)`, d.ID)
		require.NoError(t, err)
		before := rc.count()
		resp := retry(d.ID)
		require.Equal(t, 202, resp.Status, "%s", resp.Body)
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 2))
		require.Equal(t, before+1, rc.count())
	})

	t.Run("RetryingWhileItsJobIsMarked", func(t *testing.T) {
		// The worker records a failed attempt (retrying) a moment before
		// River marks its job retryable. A retry in that moment waits for
		// River instead of answering 409.
		code.Store(500)
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		d = b.waitDelivery(t, acct.Key, d.ID, is("retrying", 1))
		b.jobSettled(t, d.ID)
		ctx := context.Background()
		_, err := b.db.Exec(ctx, `UPDATE river_job SET state = 'running', attempted_at = now()
			WHERE id = (SELECT job_id FROM webhook_deliveries WHERE id = $1)`, d.ID)
		require.NoError(t, err)
		_, err = b.db.Exec(ctx, `UPDATE webhook_deliveries SET updated_at = now() WHERE id = $1`, d.ID)
		require.NoError(t, err)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = b.db.Exec(ctx, `UPDATE river_job SET state = 'retryable', scheduled_at = now() + interval '1 hour'
				WHERE id = (SELECT job_id FROM webhook_deliveries WHERE id = $1)`, d.ID)
		}()
		code.Store(200)
		resp := retry(d.ID)
		require.Equal(t, 202, resp.Status, "%s", resp.Body)
		b.waitDelivery(t, acct.Key, d.ID, is("delivered", 2))
	})

	t.Run("Failed", func(t *testing.T) {
		code.Store(410)
		d := b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID))
		b.waitDelivery(t, acct.Key, d.ID, is("failed", 1))
		b.jobSettled(t, d.ID)
		resp := retry(d.ID)
		require.Equal(t, 409, resp.Status, "the 410 disabled the subscription")
		require.Contains(t, resp.Detail(t), "disabled")
		resp = b.do(t, "GET", subsPath+"/"+sub.ID, acct.Key, nil)
		var s subscriptionJSON
		resp.JSON(t, &s)
		require.False(t, s.Enabled)
		require.NotNil(t, s.DisabledReason)

		require.Equal(t, 200, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, map[string]any{"enabled": true}).Status)
		code.Store(200)
		resp = retry(d.ID)
		require.Equal(t, 202, resp.Status, "%s", resp.Body)
		d = b.waitDelivery(t, acct.Key, d.ID, is("delivered", 2))
		require.Equal(t, 2, d.MaxAttempts)
	})
}

// TestDeliveryShowsItsJobAndPendingReconciliation: a delivery names the
// River job that owns it (tagged so River UI's filters find it), and a
// queued delivery whose job an operator cancelled or deleted outside the
// API (psql, another River UI) says so at once instead of showing a
// next_retry_at that will never happen.
func TestDeliveryShowsItsJobAndPendingReconciliation(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t) // the worker is not started: deliveries stay pending
	acct := b.createAccount(t)
	rc := newHookReceiver(t, nil)
	sub := createSub(t, b.testBundle, acct.Key, map[string]any{"url": rc.URL})
	ctx := context.Background()
	type withJob struct {
		ID                    string     `json:"id"`
		Status                string     `json:"status"`
		JobID                 *int64     `json:"job_id"`
		NextRetryAt           *time.Time `json:"next_retry_at"`
		PendingReconciliation bool       `json:"pending_reconciliation"`
	}
	get := func(id string) withJob {
		resp := b.do(t, "GET", "/api/accounts/me/deliveries/"+id, acct.Key, nil)
		require.Equal(t, 200, resp.Status, "%s", resp.Body)
		var d withJob
		resp.JSON(t, &d)
		return d
	}
	ids := make([]string, 2)
	for i := range ids {
		ids[i] = b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID)).ID
	}
	for _, id := range ids {
		d := get(id)
		require.NotNil(t, d.JobID)
		require.False(t, d.PendingReconciliation)
		var tags []string
		require.NoError(t, b.db.QueryRow(ctx, "SELECT tags FROM river_job WHERE id = $1", *d.JobID).Scan(&tags))
		require.ElementsMatch(t, []string{"account-" + acct.ID, "event-" + events.TypeReceiverMessageReceived, "subscription-" + sub.ID}, tags)
	}

	// Operators cancel one job and delete the other, outside the API; the
	// first is also scheduled for later, as a snoozed delivery would be.
	first, second := get(ids[0]), get(ids[1])
	_, err := b.db.Exec(ctx, "UPDATE webhook_deliveries SET next_retry_at = now() + interval '1 hour' WHERE id = $1", ids[0])
	require.NoError(t, err)
	require.NotNil(t, get(ids[0]).NextRetryAt)
	_, err = b.worker.JobCancel(ctx, *first.JobID)
	require.NoError(t, err)
	_, err = b.worker.JobDelete(ctx, *second.JobID)
	require.NoError(t, err)
	for _, id := range ids {
		d := get(id)
		require.Equal(t, "pending", d.Status, "the reconciler has not run yet")
		require.True(t, d.PendingReconciliation)
		require.Nil(t, d.NextRetryAt, "no attempt will run at that time")
	}
	resp := b.do(t, "GET", "/api/accounts/me/deliveries?status=pending", acct.Key, nil)
	var page []withJob
	resp.JSON(t, &page)
	require.Len(t, page, 2)
	for _, d := range page {
		require.True(t, d.PendingReconciliation)
	}

	// The reconciler converges them; the flag goes away.
	n, err := deliveries.Reconcile(ctx, b.db, &events.Emitter{River: b.worker}, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range ids {
		d := get(id)
		require.Equal(t, "failed", d.Status)
		require.False(t, d.PendingReconciliation)
	}
}
