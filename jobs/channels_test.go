package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/alerts"
	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// fakeChat stands in for Slack, Teams or PagerDuty on loopback: it
// answers with the status (and headers) it is told and keeps each body.
type fakeChat struct {
	srv *httptest.Server
	mu  sync.Mutex
	// answer is the status to answer; 200 when zero.
	answer int
	header http.Header
	bodies [][]byte
}

func newFakeChat(t *testing.T) *fakeChat {
	t.Helper()
	f := &fakeChat{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		status, header := f.answer, f.header
		f.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeChat) set(status int, header http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer, f.header = status, header
}

func (f *fakeChat) received() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// channelEnv is a fresh database, a River client working the webhooks
// queue with the channel hosts limited to one loopback server, and an
// account.
type channelEnv struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	svc     *channels.Service
	chat    *fakeChat
	account uuid.UUID
}

func newChannelEnv(t *testing.T, adjust ...func(*Deps)) *channelEnv {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	chat := newFakeChat(t)
	hosts, err := channels.ParseAllowedHosts(strings.TrimPrefix(chat.srv.URL, "http://"))
	require.NoError(t, err)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	deps := Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keyring: keyring,
		WebhookClient: webhook.NewClient(loopbackGuard(t), webhook.ClientOptions{}), ChannelHosts: hosts,
		Mail: &notify.Mailer{BaseURL: testDashboard},
	}
	for _, f := range adjust {
		f(&deps)
	}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.Webhooks, queues.Default}})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	account := uuid.Must(uuid.NewV7())
	_, err = pool.Exec(context.Background(), "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, account.String()+"@example.com")
	require.NoError(t, err)
	return &channelEnv{pool: pool, client: client, chat: chat, account: account,
		svc: &channels.Service{Keyring: keyring, Hosts: deps.ChannelHosts}}
}

func (e *channelEnv) channel(t *testing.T, kind string) dbsqlc.NotificationChannel {
	t.Helper()
	n := channels.New{Kind: kind, URL: &e.chat.srv.URL}
	if kind == channels.KindPagerDuty {
		key := strings.Repeat("k", channels.RoutingKeyLength)
		n.RoutingKey = &key
	}
	row, err := e.svc.Create(context.Background(), e.pool, e.account, n)
	require.NoError(t, err)
	return row
}

func (e *channelEnv) emit(t *testing.T, ev events.Event) dbsqlc.Event {
	t.Helper()
	ev.AccountID = e.account
	row, err := dbutil.WithTxV(context.Background(), e.pool, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Event, error) {
		return (&events.Emitter{River: e.client}).Emit(ctx, tx, ev)
	})
	require.NoError(t, err)
	return row
}

// job waits for the channel send job of (channel, event) to reach a state
// ok accepts, and returns it.
func (e *channelEnv) job(t *testing.T, channel, event uuid.UUID, ok func(*rivertype.JobRow) bool) *rivertype.JobRow {
	t.Helper()
	var job *rivertype.JobRow
	require.Eventually(t, func() bool {
		res, err := e.client.JobList(context.Background(), river.NewJobListParams().Kinds(events.ChannelSendKind).First(100))
		require.NoError(t, err)
		for _, j := range res.Jobs {
			var a events.ChannelSendArgs
			require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
			if a.ChannelID == channel && a.EventID == event {
				job = j
				return ok(j)
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	return job
}

func (e *channelEnv) reload(t *testing.T, id uuid.UUID) dbsqlc.NotificationChannel {
	t.Helper()
	row, err := channels.Get(context.Background(), e.pool, e.account, id)
	require.NoError(t, err)
	return row
}

func completed(j *rivertype.JobRow) bool { return j.State == rivertype.JobStateCompleted }

// TestChannelSendSlack: a critical event emitted through events.Emitter
// reaches the channel's server through the River worker, as a Block Kit
// message naming the domain and linking to the alert; the channel records
// the success.
func TestChannelSendSlack(t *testing.T) {
	t.Parallel()
	e := newChannelEnv(t)
	ch := e.channel(t, channels.KindSlack)
	ev := e.emit(t, criticalHealth())
	job := e.job(t, ch.ID, ev.ID, completed)
	require.Contains(t, job.Tags, "account-"+e.account.String())
	require.Contains(t, job.Tags, "channel-"+ch.ID.String())
	require.Equal(t, queues.Webhooks, job.Queue)

	bodies := e.chat.received()
	require.Len(t, bodies, 1)
	var msg struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(bodies[0], &msg))
	require.Equal(t, "[critical] Health score changed on example.com: score fell from 90 to 40", msg.Text)
	require.Contains(t, string(bodies[0]), testDashboard+"/alerts?event="+ev.ID.String())
	require.NotEmpty(t, msg.Blocks)

	row := e.reload(t, ch.ID)
	require.NotNil(t, row.LastSuccessAt)
	require.Nil(t, row.FailingSince)
}

// TestChannelSendRetries: 429 with Retry-After and 503 are retried (the
// second attempt scheduled, at the Retry-After for the 429); 400 and 404
// cancel the job at once. The channel records the failure.
func TestChannelSendRetries(t *testing.T) {
	t.Parallel()
	e := newChannelEnv(t)
	ch := e.channel(t, channels.KindTeams)
	for _, c := range []struct {
		status    int
		header    http.Header
		retry     bool
		waitAbout time.Duration
	}{
		{http.StatusTooManyRequests, http.Header{"Retry-After": {"1800"}}, true, 30 * time.Minute},
		{http.StatusServiceUnavailable, nil, true, webhook.BaseDelay(1)},
		{http.StatusTooManyRequests, http.Header{"Retry-After": {"86400"}}, true, channels.MaxRetryAfter},
		{http.StatusBadRequest, nil, false, 0},
		{http.StatusNotFound, nil, false, 0},
	} {
		e.chat.set(c.status, c.header)
		start := time.Now()
		ev := e.emit(t, criticalHealth())
		job := e.job(t, ch.ID, ev.ID, func(j *rivertype.JobRow) bool {
			// River makes a retry due within its scheduler interval
			// available at once, with the attempt's error recorded.
			return j.State == rivertype.JobStateRetryable || j.State == rivertype.JobStateCancelled ||
				(j.State == rivertype.JobStateAvailable && len(j.Errors) > 0)
		})
		require.Equal(t, 1, job.Attempt, "%d", c.status)
		require.NotEmpty(t, job.Errors)
		require.Contains(t, job.Errors[0].Error, "status "+itoa(c.status))
		if c.retry {
			require.Contains(t, []rivertype.JobState{rivertype.JobStateRetryable, rivertype.JobStateAvailable}, job.State, "%d is retried", c.status)
			wait := job.ScheduledAt.Sub(start)
			require.InDelta(t, c.waitAbout.Seconds(), wait.Seconds(), c.waitAbout.Seconds()*0.15+5, "%d: attempt 2 after %v", c.status, wait)
		} else {
			require.Equal(t, rivertype.JobStateCancelled, job.State, "%d is not retried", c.status)
		}
		row := e.reload(t, ch.ID)
		require.NotNil(t, row.FailingSince)
		require.NotNil(t, row.LastError)
		require.Contains(t, *row.LastError, "Microsoft Teams answered "+itoa(c.status))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestChannelFailingAndRecovered: a channel failing for a day raises
// notification_channel_failing once; its next success raises
// notification_channel_recovered and stops the clock.
func TestChannelFailingAndRecovered(t *testing.T) {
	t.Parallel()
	e := newChannelEnv(t)
	ch := e.channel(t, channels.KindSlack)
	_, err := e.pool.Exec(context.Background(), `UPDATE notification_channels SET failing_since = now() - interval '25 hours' WHERE id = $1`, ch.ID)
	require.NoError(t, err)
	count := func(typ string) int {
		var n int
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2
			AND payload->>'channel_id' = $3`, e.account, typ, ch.ID.String()).Scan(&n))
		return n
	}
	cancelled := func(j *rivertype.JobRow) bool { return j.State == rivertype.JobStateCancelled }
	e.chat.set(http.StatusNotFound, nil)
	for range 2 {
		ev := e.emit(t, criticalHealth())
		e.job(t, ch.ID, ev.ID, cancelled)
	}
	require.Equal(t, 1, count(events.TypeNotificationChannelFailing), "once per failing period")
	var jobs int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job j JOIN events ev ON j.args->>'event_id' = ev.id::text
		WHERE j.kind = $1 AND ev.event_type = $2`, events.ChannelSendKind, events.TypeNotificationChannelFailing).Scan(&jobs))
	require.Zero(t, jobs, "no cascade: the failure is not sent to channels")

	e.chat.set(http.StatusOK, nil)
	ev := e.emit(t, criticalHealth())
	e.job(t, ch.ID, ev.ID, completed)
	require.Equal(t, 1, count(events.TypeNotificationChannelRecovered))
	row := e.reload(t, ch.ID)
	require.Nil(t, row.FailingSince)
	require.Nil(t, row.LastError)
}

// TestChannelPagerDutyAcknowledge: an alert triggers a PagerDuty incident
// deduplicated by the alert's id; acknowledging it in mailwatch
// (alerts.Acknowledge) resolves it, withdrawing the acknowledgement
// triggers it again.
func TestChannelPagerDutyAcknowledge(t *testing.T) {
	t.Parallel()
	e := newChannelEnv(t)
	ch := e.channel(t, channels.KindPagerDuty)
	alert := e.emit(t, criticalHealth())
	e.job(t, ch.ID, alert.ID, completed)
	type pdEvent struct {
		RoutingKey  string `json:"routing_key"`
		EventAction string `json:"event_action"`
		DedupKey    string `json:"dedup_key"`
		Payload     *struct {
			Summary  string `json:"summary"`
			Severity string `json:"severity"`
			Source   string `json:"source"`
		} `json:"payload"`
	}
	last := func(n int) pdEvent {
		t.Helper()
		var got [][]byte
		require.Eventually(t, func() bool { got = e.chat.received(); return len(got) >= n }, 30*time.Second, 20*time.Millisecond)
		require.Len(t, got, n)
		var p pdEvent
		require.NoError(t, json.Unmarshal(got[n-1], &p))
		return p
	}
	trigger := last(1)
	require.Equal(t, "trigger", trigger.EventAction)
	require.Equal(t, alert.ID.String(), trigger.DedupKey)
	require.Equal(t, strings.Repeat("k", 32), trigger.RoutingKey)
	require.Equal(t, "critical", trigger.Payload.Severity)
	require.Equal(t, "example.com", trigger.Payload.Source)

	em := &events.Emitter{River: e.client}
	_, err := alerts.Acknowledge(context.Background(), e.pool, em, e.account, alert.ID, alerts.Acknowledgement{By: "oncall"}, time.Now())
	require.NoError(t, err)
	resolve := last(2)
	require.Equal(t, "resolve", resolve.EventAction)
	require.Equal(t, alert.ID.String(), resolve.DedupKey)
	require.Nil(t, resolve.Payload)

	_, err = alerts.Unacknowledge(context.Background(), e.pool, em, e.account, alert.ID, "mw_x", time.Now())
	require.NoError(t, err)
	again := last(3)
	require.Equal(t, "trigger", again.EventAction)
	require.Equal(t, alert.ID.String(), again.DedupKey)

	// A warning is never sent to PagerDuty.
	warn := criticalHealth()
	warn.Payload = map[string]any{"domain": "example.com", "previous_score": 90, "score": 84, "delta": -6}
	w := e.emit(t, warn)
	require.Equal(t, "warning", w.Severity)
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'event_id' = $2`,
		events.ChannelSendKind, w.ID.String()).Scan(&n))
	require.Zero(t, n)
}

// TestChannelSendsWaitTheirTurn: channel sends are bounded per account as
// webhook pushes are: with a bound of one, an account's second send waits
// (snoozed, no attempt used) while its first is held by a slow endpoint,
// then goes out.
func TestChannelSendsWaitTheirTurn(t *testing.T) {
	t.Parallel()
	tp := newTarpit(t)
	e := newChannelEnv(t, func(d *Deps) {
		hosts, err := channels.ParseAllowedHosts(strings.TrimPrefix(tp.URL, "http://"))
		require.NoError(t, err)
		d.ChannelHosts = hosts
		d.Settings.WebhookLimits = webhook.Limits{PerAccount: 1}
	})
	var chans []dbsqlc.NotificationChannel
	for range 2 {
		row, err := e.svc.Create(context.Background(), e.pool, e.account, channels.New{Kind: channels.KindSlack, URL: &tp.URL})
		require.NoError(t, err)
		chans = append(chans, row)
	}
	ev := e.emit(t, criticalHealth())
	tp.waitUntil(t, "one send held", func(c tarpitCounts) bool { return c.inFlight == 1 })
	var waited int
	require.Eventually(t, func() bool {
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
			WHERE kind = $1 AND (metadata->>'fair_waits')::int > 0`, events.ChannelSendKind).Scan(&waited))
		return waited > 0
	}, 30*time.Second, 10*time.Millisecond, "the account's second send waits its turn")
	tp.open()
	for _, ch := range chans {
		j := e.job(t, ch.ID, ev.ID, completed)
		require.Equal(t, 1, j.Attempt-snoozes(j), "waiting used no attempt")
	}
	c := tp.counts()
	require.Equal(t, 1, c.maxInFlight)
	require.Equal(t, 2, c.answered)
}

// snoozes is how many times River snoozed a job (each snooze counts as an
// attempt in River's own counter and is given back in max_attempts).
func snoozes(j *rivertype.JobRow) int { return j.MaxAttempts - events.ChannelSendMaxAttempts }
