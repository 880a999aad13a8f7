package jobs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// TestBillingJobsOnRiver works the billing jobs with a real River client:
// a stored subscription event moves the plan (plan_changed in the same
// transaction), an event of a customer no account is linked to is snoozed
// rather than failed, and the grace sweep downgrades an account whose
// grace period ended.
func TestBillingJobsOnRiver(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Settings: Settings{
		StripePricePlans: plans.PriceMap{"price_jobs_pro": plans.Pro}, BillingGracePeriod: time.Hour,
	}}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.Default, queues.Maintenance}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	waitKind := func(kind string) *river.Event {
		for ev := range done {
			if ev.Job.Kind == kind {
				return ev
			}
		}
		return nil
	}
	exec := func(sql string, args ...any) {
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	account := uuid.New()
	exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'jobs-billing@example.com', 'x')`, account)
	exec(`INSERT INTO account_plans (account_id, stripe_customer_id) VALUES ($1, 'cus_jobs')`, account)
	store := func(id, typ string, object map[string]any) {
		body, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": time.Now().Unix(), "data": map[string]any{"object": object}})
		require.NoError(t, err)
		exec(`INSERT INTO stripe_events (id, type, created, payload) VALUES ($1, $2, now(), $3)`, id, typ, body)
		_, err = client.Insert(ctx, billing.StripeEventArgs{EventID: id}, nil)
		require.NoError(t, err)
	}
	sub := func(customer string) map[string]any {
		return map[string]any{"id": "sub_" + customer, "object": "subscription", "customer": customer, "status": "active",
			"items": map[string]any{"object": "list", "data": []any{map[string]any{"price": map[string]any{"id": "price_jobs_pro", "object": "price"}}}}}
	}

	store("evt_jobs_1", "customer.subscription.created", sub("cus_jobs"))
	ev := waitKind("stripe_event")
	require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
	var plan string
	var changed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT plan FROM account_plans WHERE account_id = $1`, account).Scan(&plan))
	require.Equal(t, plans.Pro, plan)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'plan_changed'`, account).Scan(&changed))
	require.Equal(t, 1, changed)

	store("evt_jobs_2", "customer.subscription.created", sub("cus_nobody"))
	ev = waitKind("stripe_event")
	require.Equal(t, rivertype.JobStateScheduled, ev.Job.State, "an unlinked customer's event waits for its checkout")
	var applied *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT applied_at FROM stripe_events WHERE id = 'evt_jobs_2'`).Scan(&applied))
	require.Nil(t, applied)

	exec(`UPDATE account_plans SET billing_status = 'past_due', grace_until = now() - interval '1 minute' WHERE account_id = $1`, account)
	_, err = client.Insert(ctx, BillingGraceArgs{}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	ev = waitKind("billing_grace")
	require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
	var stored *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT plan FROM account_plans WHERE account_id = $1`, account).Scan(&stored))
	require.Nil(t, stored, "back on the default plan, whatever DEFAULT_PLAN says then")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'plan_changed'`, account).Scan(&changed))
	require.Equal(t, 2, changed)
}

// TestStripeEventPrune keeps a replay key for as long as Stripe can retry:
// applied events past the retention go, recent ones and events never
// applied stay.
func TestStripeEventPrune(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	insert := func(id string, received time.Time, applied bool) {
		var appliedAt *time.Time
		if applied {
			appliedAt = &received
		}
		_, err := pool.Exec(ctx, `INSERT INTO stripe_events (id, type, created, payload, received_at, applied_at, outcome)
			VALUES ($1, 'invoice.paid', $2, '{}', $2, $3, CASE WHEN $3::timestamptz IS NULL THEN NULL ELSE 'applied' END)`, id, received, appliedAt)
		require.NoError(t, err)
	}
	old := now.Add(-stripeEventRetention - time.Hour)
	insert("evt_old_applied", old, true)
	insert("evt_old_pending", old, false)
	insert("evt_recent_applied", now.Add(-stripeEventRetention+time.Hour), true)
	_, err := pool.Exec(ctx, `INSERT INTO stripe_events (id, type, created, payload, received_at, applied_at, outcome)
		SELECT 'evt_bulk_' || i, 'invoice.paid', $1, '{}', $1, $1, 'applied' FROM generate_series(1, $2::int) i`,
		old, stripeEventPruneBatch+3) // more than one batch
	require.NoError(t, err)

	w := &StripeEventPruneWorker{deps: Deps{Pool: pool, Now: func() time.Time { return now }}.withDefaults()}
	require.NoError(t, w.Work(ctx, &river.Job[StripeEventPruneArgs]{}))

	rows, err := pool.Query(ctx, `SELECT id FROM stripe_events ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"evt_old_pending", "evt_recent_applied"}, left)
}
