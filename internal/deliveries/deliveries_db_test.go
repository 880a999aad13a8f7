package deliveries

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixture is one account with one subscription in a transaction rolled
// back at the end of the test. The subscription only takes
// receiver_message_received, so that the events these rules emit
// (webhook_delivery_failed, subscription_disabled) create no deliveries
// and need no River client.
type fixture struct {
	ctx     context.Context
	tx      pgx.Tx
	account uuid.UUID
	sub     uuid.UUID
	event   uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureIn(t, dbtest.Tx(t))
}

// newFixtureIn is another account's fixture in the same transaction.
func newFixtureIn(t *testing.T, tx pgx.Tx) *fixture {
	t.Helper()
	f := &fixture{ctx: context.Background(), tx: tx, account: uuid.Must(uuid.NewV7()), sub: uuid.Must(uuid.NewV7())}
	f.exec(t, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", f.account, f.account.String()+"@example.com")
	f.exec(t, `INSERT INTO event_subscriptions (id, account_id, url, event_types, secret_ciphertext, secret_key_id)
VALUES ($1, $2, 'https://u:p@hooks.example.com/in?token=x', ARRAY['receiver_message_received'], '\x00', 'k')`, f.sub, f.account)
	ev, err := (&events.Emitter{}).Emit(f.ctx, f.tx, events.Event{AccountID: f.account, Type: events.TypeHealthScoreChanged,
		Domain: "example.com", Tags: []string{"prod"},
		Payload: map[string]any{"domain": "example.com", "previous_score": 80, "score": 70, "delta": -10}})
	require.NoError(t, err)
	f.event = ev.ID
	return f
}

func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := f.tx.Exec(f.ctx, sql, args...)
	require.NoError(t, err)
}

// delivery inserts a delivery of the fixture's event in this status, with
// this many attempts, owned by job (nil: none), last changed at changed.
func (f *fixture) delivery(t *testing.T, status string, attempts int, job *int64, changed time.Time) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	f.exec(t, `INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body, status, attempts, job_id, updated_at)
VALUES ($1, $2, $3, $4, $5, '{}', $6, $7, $8, $9)`, id, f.account, f.sub, f.event, events.TypeHealthScoreChanged, status, attempts, job, changed)
	return id
}

func (f *fixture) get(t *testing.T, id uuid.UUID) dbsqlc.WebhookDelivery {
	t.Helper()
	d, err := dbsqlc.New().DeliveryGetByID(f.ctx, f.tx, dbsqlc.DeliveryGetByIDParams{ID: id, AccountID: f.account})
	require.NoError(t, err)
	return d
}

func (f *fixture) subscription(t *testing.T) dbsqlc.EventSubscription {
	t.Helper()
	s, err := dbsqlc.New().SubscriptionGetForDelivery(f.ctx, f.tx, f.sub)
	require.NoError(t, err)
	return s
}

// events returns the payloads of the account's events of this type.
func (f *fixture) events(t *testing.T, typ string) []string {
	t.Helper()
	rows, err := f.tx.Query(f.ctx, "SELECT payload::text FROM events WHERE account_id = $1 AND event_type = $2", f.account, typ)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// job inserts a River job of the delivery kind in this state, due at at.
func (f *fixture) job(t *testing.T, state string, at time.Time) int64 {
	t.Helper()
	var id int64
	require.NoError(t, f.tx.QueryRow(f.ctx, `INSERT INTO river_job (kind, args, max_attempts, queue, state, scheduled_at, attempt, attempted_at, finalized_at)
VALUES ($1, '{}', 10, $2, $3::river_job_state, $4, 1, now(), CASE WHEN $3::text IN ('cancelled', 'completed', 'discarded') THEN now() END) RETURNING id`, events.DeliveryKind, queues.Webhooks, state, at).Scan(&id))
	return id
}

// attempt starts an attempt of delivery id by job through Start.
func (f *fixture) attempt(t *testing.T, id uuid.UUID, job int64, now time.Time) *Started {
	t.Helper()
	st, skip, err := Start(f.ctx, f.tx, StartParams{DeliveryID: id, JobID: job, Attempt: 1, MaxAttempts: 10, Now: now})
	require.NoError(t, err)
	require.Nil(t, skip)
	require.NotNil(t, st)
	return st
}

type cancelled struct{ ids []int64 }

func (c *cancelled) JobCancelTx(_ context.Context, _ pgx.Tx, id int64) (*rivertype.JobRow, error) {
	c.ids = append(c.ids, id)
	return &rivertype.JobRow{ID: id}, nil
}

// fail records a failed push answered with code through Decide and Finish.
func (f *fixture) fail(t *testing.T, st *Started, job int64, code int, now time.Time) (Outcome, *cancelled) {
	t.Helper()
	a := webhook.Attempt{StatusCode: code, ErrorClass: webhook.ErrorClassHTTPStatus, Error: "no"}
	oc := Decide(Run{Attempt: 1, MaxAttempts: 10}, st.Delivery, a, now)
	c := &cancelled{}
	require.NoError(t, Finish(f.ctx, f.tx, FinishParams{Started: st, Attempt: a, Outcome: oc, JobID: job, Cancel: c, Now: now}))
	return oc, c
}

func TestFinishAutoDisable(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()

	t.Run("FirstFailureMarksTheSubscriptionFailing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		id := f.delivery(t, StatusPending, 0, new(int64(7)), now)
		oc, c := f.fail(t, f.attempt(t, id, 7, now), 7, 500, now)
		require.Equal(t, StatusRetrying, oc.Status)
		require.Empty(t, c.ids)
		d := f.get(t, id)
		require.Equal(t, StatusRetrying, d.Status)
		require.EqualValues(t, 1, d.Attempts)
		require.EqualValues(t, 500, *d.LastStatusCode)
		s := f.subscription(t)
		require.True(t, s.Enabled)
		require.NotNil(t, s.FailingSince)
		require.Empty(t, f.events(t, events.TypeSubscriptionDisabled))
	})

	t.Run("FailingForFiveDaysDisables", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.exec(t, "UPDATE event_subscriptions SET failing_since = $2 WHERE id = $1", f.sub, now.Add(-FailingDisableAfter-time.Hour))
		id := f.delivery(t, StatusRetrying, 3, new(int64(7)), now)
		f.fail(t, f.attempt(t, id, 7, now), 7, 502, now)
		s := f.subscription(t)
		require.False(t, s.Enabled)
		require.Equal(t, "every delivery failed for 5 days", *s.DisabledReason)
		got := f.events(t, events.TypeSubscriptionDisabled)
		require.Len(t, got, 1)
		require.Contains(t, got[0], `"url": "https://hooks.example.com/in"`, "the URL is redacted")
		require.Equal(t, StatusRetrying, f.get(t, id).Status, "the delivery keeps its schedule")
	})

	t.Run("FailingForLessStaysEnabled", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.exec(t, "UPDATE event_subscriptions SET failing_since = $2 WHERE id = $1", f.sub, now.Add(-FailingDisableAfter+time.Hour))
		id := f.delivery(t, StatusRetrying, 3, new(int64(7)), now)
		f.fail(t, f.attempt(t, id, 7, now), 7, 502, now)
		require.True(t, f.subscription(t).Enabled)
		require.Empty(t, f.events(t, events.TypeSubscriptionDisabled))
	})

	t.Run("GoneDisablesFailsAndCancelsTheJob", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		id := f.delivery(t, StatusPending, 0, new(int64(9)), now)
		oc, c := f.fail(t, f.attempt(t, id, 9, now), 9, 410, now)
		require.True(t, oc.CancelJob)
		require.Equal(t, []int64{9}, c.ids)
		require.Equal(t, StatusFailed, f.get(t, id).Status)
		s := f.subscription(t)
		require.False(t, s.Enabled)
		require.Contains(t, *s.DisabledReason, "410")
		failed := f.events(t, events.TypeWebhookDeliveryFailed)
		require.Len(t, failed, 1)
		require.Contains(t, failed[0], id.String())
		require.Len(t, f.events(t, events.TypeSubscriptionDisabled), 1)
	})
}

func TestStartOfADisabledSubscriptionFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.exec(t, "UPDATE event_subscriptions SET enabled = false, disabled_reason = 'by hand' WHERE id = $1", f.sub)
	id := f.delivery(t, StatusRetrying, 2, new(int64(5)), time.Now())
	st, skip, err := Start(f.ctx, f.tx, StartParams{DeliveryID: id, JobID: 5, Attempt: 3, MaxAttempts: 10, Now: time.Now()})
	require.NoError(t, err)
	require.Nil(t, st)
	require.Equal(t, SkipSubscriptionDisabled, skip.Reason)
	require.True(t, skip.Cancelled)
	require.Contains(t, skip.Detail, "(by hand)")
	d := f.get(t, id)
	require.Equal(t, StatusFailed, d.Status)
	require.Equal(t, ErrorClassSubscriptionDisabled, *d.LastErrorClass)
	require.Len(t, f.events(t, events.TypeWebhookDeliveryFailed), 1)
}

func TestStartSkipsADeliveryOwnedByAnActiveJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	owner := f.job(t, "scheduled", time.Now().Add(time.Hour))
	id := f.delivery(t, StatusRetrying, 1, &owner, time.Now())
	st, skip, err := Start(f.ctx, f.tx, StartParams{DeliveryID: id, JobID: owner + 1000, Attempt: 2, MaxAttempts: 10, Now: time.Now()})
	require.NoError(t, err)
	require.Nil(t, st)
	require.Equal(t, SkipOwnedByOtherJob, skip.Reason)
	require.Equal(t, owner, *skip.OwnerJobID)
	require.EqualValues(t, 1, f.get(t, id).Attempts, "no attempt started")
}

func TestReconcile(t *testing.T) {
	t.Parallel()

	t.Run("RowWhoseJobIsGoneFails", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		gone := int64(1 << 40) // no such job
		id := f.delivery(t, StatusRetrying, 2, &gone, time.Now().Add(-time.Hour))
		n, err := Reconcile(f.ctx, f.tx, &events.Emitter{}, time.Now())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		d := f.get(t, id)
		require.Equal(t, StatusFailed, d.Status)
		require.Equal(t, ErrorClassJobGone, *d.LastErrorClass)
		failed := f.events(t, events.TypeWebhookDeliveryFailed)
		require.Len(t, failed, 1)
		var domain string
		require.NoError(t, f.tx.QueryRow(f.ctx, "SELECT domain FROM events WHERE account_id = $1 AND event_type = $2",
			f.account, events.TypeWebhookDeliveryFailed).Scan(&domain))
		require.Equal(t, "example.com", domain, "the original event's domain, for filtered subscriptions")
		// Nothing left to repair.
		n, err = Reconcile(f.ctx, f.tx, &events.Emitter{}, time.Now())
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("RecentRowIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		gone := int64(1 << 41)
		id := f.delivery(t, StatusPending, 0, &gone, time.Now())
		n, err := Reconcile(f.ctx, f.tx, &events.Emitter{}, time.Now().Add(-ReconcileGrace))
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, StatusPending, f.get(t, id).Status)
		// ReconcileJobs repairs it at once, whatever its age.
		n, err = ReconcileJobs(f.ctx, f.tx, &events.Emitter{}, []int64{gone})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, StatusFailed, f.get(t, id).Status)
	})

	t.Run("CancelledJobFailsAndRetriedJobRequeues", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		old := time.Now().Add(-time.Hour)
		cancelledJob := f.job(t, "cancelled", old)
		cancelledRow := f.delivery(t, StatusRetrying, 1, &cancelledJob, old)
		at := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
		retriedJob := f.job(t, "scheduled", at)
		retriedRow := f.delivery(t, StatusFailed, 3, &retriedJob, old)
		n, err := Reconcile(f.ctx, f.tx, &events.Emitter{}, time.Now())
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, ErrorClassJobCancelled, *f.get(t, cancelledRow).LastErrorClass)
		d := f.get(t, retriedRow)
		require.Equal(t, StatusRetrying, d.Status)
		require.True(t, at.Equal(*d.NextRetryAt), "next_retry_at %v, job %v", d.NextRetryAt, at)
	})
}

// queue is a River stand-in recording what a retry asked of it.
type queue struct {
	inserted []river.JobArgs
	opts     []*river.InsertOpts
	retried  []int64
}

func (q *queue) InsertTx(_ context.Context, _ pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	q.inserted, q.opts = append(q.inserted, args), append(q.opts, opts)
	return &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: 4242}}, nil
}

func (q *queue) JobRetryTx(_ context.Context, _ pgx.Tx, id int64) (*rivertype.JobRow, error) {
	q.retried = append(q.retried, id)
	return &rivertype.JobRow{ID: id}, nil
}

func TestRetryOnce(t *testing.T) {
	t.Parallel()
	now := time.Now()

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		q := &queue{}
		_, err := RetryOnce(f.ctx, f.tx, q, f.account, uuid.Must(uuid.NewV7()), now)
		require.ErrorIs(t, err, ErrNotFound)
		id := f.delivery(t, StatusFailed, 10, nil, now)
		_, err = RetryOnce(f.ctx, f.tx, q, uuid.Must(uuid.NewV7()), id, now)
		require.ErrorIs(t, err, ErrNotFound, "another account's delivery")

		running := f.job(t, "running", now)
		pending := f.delivery(t, StatusPending, 0, &running, now.Add(-time.Minute))
		_, err = RetryOnce(f.ctx, f.tx, q, f.account, pending, now)
		require.ErrorIs(t, err, ErrInFlight)

		finishing := f.delivery(t, StatusRetrying, 1, &running, now)
		_, err = RetryOnce(f.ctx, f.tx, q, f.account, finishing, now)
		require.ErrorIs(t, err, ErrJobFinishing)

		later := f.job(t, "scheduled", now.Add(time.Hour))
		queued := f.delivery(t, StatusPending, 0, &later, now)
		_, err = RetryOnce(f.ctx, f.tx, q, f.account, queued, now)
		require.ErrorIs(t, err, ErrAlreadyQueued)

		f.exec(t, "UPDATE event_subscriptions SET enabled = false WHERE id = $1", f.sub)
		_, err = RetryOnce(f.ctx, f.tx, q, f.account, id, now)
		require.ErrorIs(t, err, ErrSubscriptionDisabled)
		require.Empty(t, q.inserted)
		require.Empty(t, q.retried)
	})

	t.Run("FailedDeliveryGetsAOneAttemptJob", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		q := &queue{}
		id := f.delivery(t, StatusFailed, 10, nil, now)
		d, err := RetryOnce(f.ctx, f.tx, q, f.account, id, now)
		require.NoError(t, err)
		require.Equal(t, []river.JobArgs{events.DeliveryArgs{DeliveryID: id}}, q.inserted)
		require.Equal(t, 1, q.opts[0].MaxAttempts)
		require.Equal(t, StatusRetrying, d.Status)
		require.EqualValues(t, 4242, *d.JobID)
		require.EqualValues(t, 11, d.MaxAttempts, "one more attempt")
	})

	t.Run("RetryingDeliveryRunsItsScheduledJobNow", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		q := &queue{}
		job := f.job(t, "retryable", now.Add(time.Hour))
		id := f.delivery(t, StatusRetrying, 2, &job, now.Add(-time.Minute))
		d, err := RetryOnce(f.ctx, f.tx, q, f.account, id, now)
		require.NoError(t, err)
		require.Equal(t, []int64{job}, q.retried)
		require.Empty(t, q.inserted)
		require.Equal(t, job, *d.JobID)
		require.True(t, now.UTC().Truncate(time.Microsecond).Equal(*d.NextRetryAt))
	})
}

// TestDeliveryCountOpenCountsEachStatusOfTheAccount: the dashboard's counts
// of deliveries needing attention count each open status of this account
// only, never delivered pushes nor another account's.
func TestDeliveryCountOpenCountsEachStatusOfTheAccount(t *testing.T) {
	f := newFixture(t)
	other := newFixtureIn(t, f.tx)
	now := time.Now()
	for status, n := range map[string]int{"pending": 2, "retrying": 1, "failed": 3, "delivered": 5} {
		for range n {
			f.delivery(t, status, 1, nil, now)
			other.delivery(t, status, 1, nil, now)
		}
	}
	other.delivery(t, "failed", 1, nil, now)
	c, err := dbsqlc.New().DeliveryCountOpen(f.ctx, f.tx, f.account)
	require.NoError(t, err)
	require.Equal(t, dbsqlc.DeliveryCountOpenRow{Pending: 2, Retrying: 1, Failed: 3}, c)
}
