package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// stripeLinkWait is how long an event whose Stripe customer is not linked
// to an account keeps waiting for checkout.session.completed (Stripe sends
// the subscription's events and the session's in no fixed order).
const stripeLinkWait = time.Hour

// stripeLinkRetry is how soon such an event is tried again.
const stripeLinkRetry = 30 * time.Second

// stripeEventRetention is how long an applied Stripe event is kept as the
// replay key: Stripe stops retrying an event after three days.
const stripeEventRetention = 30 * 24 * time.Hour

// stripeEventPruneBatch bounds one delete statement of the prune.
const stripeEventPruneBatch = 5000

// graceSweepBatch bounds how many accounts one grace run downgrades in one
// transaction; the next run takes the rest.
const graceSweepBatch = 500

// StripeEventWorker works billing.StripeEventArgs.
type StripeEventWorker struct {
	river.WorkerDefaults[billing.StripeEventArgs]
	deps Deps
}

// NewStripeEventWorker returns the worker (tests run its Work directly).
func NewStripeEventWorker(deps Deps) *StripeEventWorker {
	return &StripeEventWorker{deps: deps.withDefaults()}
}

// defaultPlan is DEFAULT_PLAN (free without a configuration: tests, tools).
func (d Deps) defaultPlan() string {
	if d.Settings.DefaultPlan != "" {
		return d.Settings.DefaultPlan
	}
	return plans.Free
}

// Applier is the billing applier configured from Deps.Settings.
func (d Deps) Applier(em *events.Emitter) *billing.Applier {
	return &billing.Applier{Emitter: em, Prices: d.Settings.StripePricePlans, Grace: d.Settings.BillingGracePeriod,
		Default: d.Settings.DefaultPlan}
}

// Work applies the event once, in one transaction with its plan_changed
// and payment_failed events. An event of a customer not linked to any
// account yet is snoozed until checkout.session.completed links it, for at
// most stripeLinkWait; then it is recorded as no_account.
func (w *StripeEventWorker) Work(ctx context.Context, job *river.Job[billing.StripeEventArgs]) error {
	now := w.deps.Now().UTC()
	applier := w.deps.Applier(&events.Emitter{})
	err := dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx dbutil.Tx) error {
		outcome, err := applier.Apply(ctx, tx, job.Args.EventID, now)
		if err == nil {
			w.deps.Logger.InfoContext(ctx, "applied Stripe event", slog.String("event_id", job.Args.EventID), slog.String("outcome", outcome))
		}
		return err
	})
	if !errors.Is(err, billing.ErrNoAccount) {
		return err
	}
	if now.Sub(job.CreatedAt) < stripeLinkWait {
		return river.JobSnooze(stripeLinkRetry)
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx dbutil.Tx) error {
		return billing.RecordUnmatched(ctx, tx, job.Args.EventID, now)
	})
}

// BillingGraceArgs moves past-due accounts whose grace period ended to the
// default plan. It carries no ids: every run converges on the current rows.
type BillingGraceArgs struct{}

// Kind implements river.JobArgs.
func (BillingGraceArgs) Kind() string { return "billing_grace" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (BillingGraceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 5 * time.Minute}}
}

// BillingGraceWorker works BillingGraceArgs.
type BillingGraceWorker struct {
	river.WorkerDefaults[BillingGraceArgs]
	deps Deps
}

// Work downgrades, in batches, every account whose grace period ended.
func (w *BillingGraceWorker) Work(ctx context.Context, job *river.Job[BillingGraceArgs]) error {
	now := w.deps.Now().UTC()
	def := w.deps.defaultPlan()
	for {
		n, err := dbutil.WithTxV(ctx, w.deps.Pool, func(ctx context.Context, tx dbutil.Tx) (int, error) {
			return billing.ExpireGrace(ctx, tx, &events.Emitter{}, def, now, graceSweepBatch)
		})
		if err != nil {
			return err
		}
		if n > 0 {
			w.deps.Logger.InfoContext(ctx, "grace periods ended: accounts moved to the default plan", slog.Int("accounts", n), slog.String("default_plan", def))
		}
		if n < graceSweepBatch {
			return nil
		}
	}
}

// StripeEventPruneArgs deletes applied Stripe events older than
// stripeEventRetention. Events never applied (no account yet, or a job
// still to run) are kept for an operator to look at.
type StripeEventPruneArgs struct{}

// Kind implements river.JobArgs.
func (StripeEventPruneArgs) Kind() string { return "stripe_event_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (StripeEventPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// StripeEventPruneWorker works StripeEventPruneArgs.
type StripeEventPruneWorker struct {
	river.WorkerDefaults[StripeEventPruneArgs]
	deps Deps
}

// Work deletes, in batches, applied events received before the cut-off.
func (w *StripeEventPruneWorker) Work(ctx context.Context, _ *river.Job[StripeEventPruneArgs]) error {
	before := w.deps.Now().Add(-stripeEventRetention)
	return deleteInBatches(stripeEventPruneBatch, func(limit int32) (int64, error) {
		return dbsqlc.New().StripeEventDeleteAppliedBefore(ctx, w.deps.Pool, dbsqlc.StripeEventDeleteAppliedBeforeParams{Before: before, Max: limit})
	})
}

// deleteInBatches runs del, a DELETE of at most limit rows, until a run
// deletes fewer: each statement holds its locks only for its own batch.
func deleteInBatches(limit int32, del func(limit int32) (int64, error)) error {
	for {
		n, err := del(limit)
		if err != nil || n < int64(limit) {
			return err
		}
	}
}

// addBillingWorkers registers this feature's workers.
func addBillingWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &StripeEventWorker{deps: deps})
	river.AddWorker(w, &BillingGraceWorker{deps: deps})
	river.AddWorker(w, &StripeEventPruneWorker{deps: deps})
}

// billingPeriodicJobs returns this feature's schedules: the grace sweep
// every five minutes, so a downgrade lands within minutes of the deadline,
// and the Stripe event prune daily.
func billingPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(5*time.Minute), func() (river.JobArgs, *river.InsertOpts) {
			return BillingGraceArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "billing_grace"}),
		river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return StripeEventPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "stripe_event_prune"}),
	}
}
