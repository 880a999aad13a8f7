package jobs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jhillyerd/enmime"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/notify/smtptest"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// notifyEnv is a fresh database, a River client working the default and
// maintenance queues that mails through a relay at relayAddr, and one
// account with a verified notification address.
type notifyEnv struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	account uuid.UUID
	now     time.Time
}

const testDashboard = "https://app.mailwatch.test"

func newNotifyEnv(t *testing.T, relayAddr string, now time.Time) *notifyEnv {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	relay, err := notify.ParseRelay("smtp://" + relayAddr)
	require.NoError(t, err)
	deps := Deps{
		Pool:   pool,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Mail:   &notify.Mailer{Relay: relay, From: "mailwatch <notifications@mailwatch.test>", BaseURL: testDashboard},
	}
	if !now.IsZero() {
		deps.Now = func() time.Time { return now }
	}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.Default, queues.Maintenance}})
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
	_, err = pool.Exec(ctx, `INSERT INTO notification_addresses (id, account_id, email, verified_at)
		VALUES (gen_random_uuid(), $1, 'ops@example.com', now())`, account)
	require.NoError(t, err)
	return &notifyEnv{pool: pool, client: client, account: account, now: now}
}

func (e *notifyEnv) emit(t *testing.T, ev events.Event) dbsqlc.Event {
	t.Helper()
	ev.AccountID = e.account
	row, err := dbutil.WithTxV(context.Background(), e.pool, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Event, error) {
		return (&events.Emitter{River: e.client}).Emit(ctx, tx, ev)
	})
	require.NoError(t, err)
	return row
}

func criticalHealth() events.Event {
	return events.Event{Type: events.TypeHealthScoreChanged, Domain: "example.com",
		Payload: map[string]any{"domain": "example.com", "previous_score": 90, "score": 40, "delta": -50}}
}

// alertJob is the alert mail job of an event.
func (e *notifyEnv) alertJob(t *testing.T, eventID uuid.UUID) *rivertype.JobRow {
	t.Helper()
	res, err := e.client.JobList(context.Background(), river.NewJobListParams().Kinds(events.AlertEmailKind).First(100))
	require.NoError(t, err)
	for _, j := range res.Jobs {
		if strings.Contains(string(j.EncodedArgs), eventID.String()) {
			return j
		}
	}
	t.Fatalf("no alert mail job for event %s", eventID)
	return nil
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func checkAlertMail(t *testing.T, m smtptest.Message, ev dbsqlc.Event, to ...string) {
	t.Helper()
	if len(to) == 0 {
		to = []string{"ops@example.com"}
	}
	require.Equal(t, "notifications@mailwatch.test", m.From)
	require.Equal(t, to, m.To)
	env, err := enmime.ReadEnvelope(bytes.NewReader(m.Data))
	require.NoError(t, err)
	require.Empty(t, env.Errors)
	require.True(t, strings.HasPrefix(env.Root.ContentType, "multipart/alternative"), env.Root.ContentType)
	require.Contains(t, env.GetHeader("Subject"), "Health score changed")
	link := testDashboard + "/alerts?event=" + ev.ID.String()
	require.Contains(t, env.Text, link, "text part")
	require.Contains(t, env.Text, "critical")
	require.Contains(t, env.HTML, `<a href="`+link+`"`, "HTML part")
	require.Contains(t, env.HTML, "example.com")
}

// TestAlertEmail: a critical event produces one email at the loopback SMTP
// server, with a text and an HTML part and the dashboard link.
func TestAlertEmail(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	e := newNotifyEnv(t, srv.Addr(), time.Time{})
	ev := e.emit(t, criticalHealth())
	require.Equal(t, "critical", ev.Severity)
	msgs := srv.Wait(t, 1)
	checkAlertMail(t, msgs[0], ev)
	require.Eventually(t, func() bool { return e.alertJob(t, ev.ID).State == rivertype.JobStateCompleted },
		30*time.Second, 20*time.Millisecond)
	require.Len(t, srv.Messages(), 1, "one alert, one email")

	// A warning is not mailed at once, and a muted email channel stops
	// alerts (the webhook channel is untouched).
	_, err := e.pool.Exec(context.Background(), `INSERT INTO notification_settings (account_id, mute_email) VALUES ($1, true)`, e.account)
	require.NoError(t, err)
	muted := e.emit(t, criticalHealth())
	var jobs int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'event_id' = $2`, events.AlertEmailKind, muted.ID.String()).Scan(&jobs))
	require.Zero(t, jobs)
}

// TestAlertEmailSuspendedAccount: a suspended account's alert is not
// mailed (a suspension pauses what goes out for it), and the job says why;
// the job carries the account's tag, so deleting the account cancels it.
func TestAlertEmailSuspendedAccount(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	e := newNotifyEnv(t, srv.Addr(), time.Time{})
	_, err := e.pool.Exec(context.Background(), `UPDATE accounts SET suspended_at = now(), suspended_reason = 'abuse' WHERE id = $1`, e.account)
	require.NoError(t, err)
	ev := e.emit(t, criticalHealth())
	var job *rivertype.JobRow
	require.Eventually(t, func() bool {
		job = e.alertJob(t, ev.ID)
		return job.State == rivertype.JobStateCompleted
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, job.Tags, "account-"+e.account.String())
	require.Contains(t, string(job.Output()), "suspended")
	require.Empty(t, srv.Messages(), "nothing mailed for a suspended account")
}

// TestAlertEmailRelayDown: a relay that is down delays the alert (the job
// fails and is retried), never loses it: once the relay is up, it arrives.
func TestAlertEmailRelayDown(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	e := newNotifyEnv(t, addr, time.Time{})
	ev := e.emit(t, criticalHealth())
	var job *rivertype.JobRow
	require.Eventually(t, func() bool {
		job = e.alertJob(t, ev.ID)
		return job.State == rivertype.JobStateRetryable || (job.State == rivertype.JobStateAvailable && len(job.Errors) > 0)
	}, time.Minute, 20*time.Millisecond, "the first attempt fails while the relay is down")
	require.NotEmpty(t, job.Errors)
	require.Contains(t, job.Errors[0].Error, "SMTP relay")

	srv := smtptest.Start(t, smtptest.Options{Addr: addr})
	checkAlertMail(t, srv.Wait(t, 1)[0], ev)
	require.Eventually(t, func() bool {
		job = e.alertJob(t, ev.ID)
		return job.State == rivertype.JobStateCompleted
	}, 30*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, job.Attempt, 2)
	require.Len(t, srv.Messages(), 1)
}

// TestDigest: the daily job mails the previous day's non-critical events
// that the email channel lets through, once, and nothing to an account
// without any.
func TestDigest(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	now := time.Date(2026, 11, 24, 0, 5, 0, 0, time.UTC)
	e := newNotifyEnv(t, srv.Addr(), now)
	ctx := context.Background()
	yesterday := now.Add(-12 * time.Hour)
	insert := func(account uuid.UUID, typ, severity string, at time.Time) {
		_, err := e.pool.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, domain, payload, rendered, created_at)
			VALUES (gen_random_uuid(), $1, $2, $3, 'example.com', '{}', '{}', $4)`, account, typ, severity, at)
		require.NoError(t, err)
	}
	insert(e.account, events.TypeBounceSpike, "warning", yesterday)
	insert(e.account, events.TypeDMARCReportReceived, "info", yesterday.Add(time.Minute))
	insert(e.account, events.TypeHealthScoreChanged, "critical", yesterday)               // alerts are mailed at once
	insert(e.account, events.TypeBounceSpike, "warning", now.Add(-36*time.Hour))          // the day before
	insert(e.account, events.TypeAlertAcknowledged, "info", yesterday.Add(2*time.Minute)) // required
	_, err := e.pool.Exec(ctx, `INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'reports', false, true)`, e.account)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'audit', false, true)`, e.account)
	require.NoError(t, err)
	// An account whose only event of the day is switched off gets nothing.
	quiet := uuid.Must(uuid.NewV7())
	_, err = e.pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", quiet, quiet.String()+"@example.com")
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO notification_addresses (id, account_id, email, verified_at) VALUES (gen_random_uuid(), $1, 'quiet@example.com', now())`, quiet)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO notification_settings (account_id, mute_email) VALUES ($1, true)`, quiet)
	require.NoError(t, err)
	insert(quiet, events.TypeBounceSpike, "warning", yesterday)
	// An account with only an alert that day, and a warning the day
	// before, gets no digest job at all (the day's hourly counters).
	alertsOnly := uuid.Must(uuid.NewV7())
	_, err = e.pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", alertsOnly, alertsOnly.String()+"@example.com")
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO notification_addresses (id, account_id, email, verified_at) VALUES (gen_random_uuid(), $1, 'alerts@example.com', now())`, alertsOnly)
	require.NoError(t, err)
	insert(alertsOnly, events.TypeHealthScoreChanged, "critical", yesterday)
	insert(alertsOnly, events.TypeBounceSpike, "warning", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Add(-time.Microsecond))

	run := func() {
		res, err := e.client.Insert(ctx, DigestScheduleArgs{}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			j, err := e.client.JobGet(ctx, res.Job.ID)
			require.NoError(t, err)
			return j.State == rivertype.JobStateCompleted
		}, 30*time.Second, 20*time.Millisecond)
	}
	run()
	var digestJobs []uuid.UUID
	rows, err := e.pool.Query(ctx, `SELECT (args->>'account_id')::uuid FROM river_job WHERE kind = 'notify_digest' ORDER BY 1`)
	require.NoError(t, err)
	digestJobs, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	want := []uuid.UUID{e.account, quiet}
	slices.SortFunc(want, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	require.Equal(t, want, digestJobs, "accounts with a non-critical event that day")
	m := srv.Wait(t, 1)[0]
	require.Equal(t, []string{"ops@example.com"}, m.To)
	env, err := enmime.ReadEnvelope(bytes.NewReader(m.Data))
	require.NoError(t, err)
	require.Contains(t, env.GetHeader("Subject"), "2026-11-23")
	require.Contains(t, env.GetHeader("Subject"), "2 event(s)")
	require.Contains(t, env.Text, events.Title(events.TypeBounceSpike))
	require.Contains(t, env.Text, events.Title(events.TypeAlertAcknowledged), "required types are in the digest whatever the group says")
	require.NotContains(t, env.Text, events.Title(events.TypeDMARCReportReceived), "switched-off group")
	require.NotContains(t, env.Text, events.Title(events.TypeHealthScoreChanged), "alerts are not in the digest")
	require.Contains(t, env.HTML, `href="`+testDashboard+`/events"`)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM notification_digests WHERE account_id = $1 AND day = '2026-11-23'`, e.account).Scan(&n))
		return n == 1
	}, 30*time.Second, 20*time.Millisecond)

	// The day is recorded: working its job again mails nothing more.
	w := &DigestWorker{deps: Deps{Pool: e.pool, Mail: &notify.Mailer{Relay: mustRelay(t, srv.Addr()), From: "a@mailwatch.test"}}.withDefaults()}
	require.NoError(t, w.Work(ctx, &river.Job[DigestArgs]{Args: DigestArgs{AccountID: e.account, Day: "2026-11-23"}}))
	require.Len(t, srv.Messages(), 1)
	// Without the record it would have sent one (the check above can fail).
	_, err = e.pool.Exec(ctx, `DELETE FROM notification_digests WHERE account_id = $1`, e.account)
	require.NoError(t, err)
	require.NoError(t, w.Work(ctx, &river.Job[DigestArgs]{Args: DigestArgs{AccountID: e.account, Day: "2026-11-23"}}))
	require.Len(t, srv.Messages(), 2)
}

func mustRelay(t *testing.T, addr string) *notify.Relay {
	t.Helper()
	r, err := notify.ParseRelay("smtp://" + addr)
	require.NoError(t, err)
	return r
}

func TestDailyAt(t *testing.T) {
	t.Parallel()
	d := dailyAt{minute: 5}
	require.Equal(t, time.Date(2026, 11, 24, 0, 5, 0, 0, time.UTC), d.Next(time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)))
	require.Equal(t, time.Date(2026, 11, 25, 0, 5, 0, 0, time.UTC), d.Next(time.Date(2026, 11, 24, 0, 5, 0, 0, time.UTC)))
	require.Equal(t, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), digestDay(time.Date(2026, 11, 24, 0, 5, 0, 0, time.UTC)))
}

// TestVerifyEmail: an address added through notify.AddAddress gets a
// verification mail at the loopback SMTP server whose token verifies it,
// once; only then does it get alerts.
func TestVerifyEmail(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	e := newNotifyEnv(t, srv.Addr(), time.Time{})
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `DELETE FROM notification_addresses WHERE account_id = $1`, e.account)
	require.NoError(t, err)
	addr, err := dbutil.WithTxV(ctx, e.pool, func(ctx context.Context, tx pgx.Tx) (notify.Address, error) {
		return notify.AddAddress(ctx, tx, e.client, e.account, "new@example.com", time.Now())
	})
	require.NoError(t, err)
	require.False(t, addr.Verified)
	// Unverified: an alert is not mailed.
	ev := e.emit(t, criticalHealth())
	var n int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'event_id' = $2`,
		events.AlertEmailKind, ev.ID.String()).Scan(&n))
	require.Zero(t, n)

	m := srv.Wait(t, 1)[0]
	require.Equal(t, []string{"new@example.com"}, m.To)
	env, err := enmime.ReadEnvelope(bytes.NewReader(m.Data))
	require.NoError(t, err)
	require.NotEmpty(t, env.HTML)
	i := strings.Index(env.Text, testDashboard+"/notifications/verify?token=")
	require.GreaterOrEqual(t, i, 0, env.Text)
	token := strings.Fields(env.Text[i+len(testDashboard+"/notifications/verify?token="):])[0]
	require.Contains(t, env.HTML, token)
	var stored []byte
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT token_hash FROM notification_addresses WHERE id = $1`, addr.ID).Scan(&stored))
	require.NotContains(t, string(stored), token, "only the hash is stored")

	got, err := notify.Verify(ctx, e.pool, token, time.Now())
	require.NoError(t, err)
	require.True(t, got.Verified)
	_, err = notify.Verify(ctx, e.pool, token, time.Now())
	require.ErrorIs(t, err, notify.ErrBadToken)

	ev = e.emit(t, criticalHealth())
	checkAlertMail(t, srv.Wait(t, 2)[1], ev, "new@example.com")
}
