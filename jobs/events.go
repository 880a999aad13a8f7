package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// defaultEventRetentionDays applies when Deps.Settings leaves it zero (tests, tools).
const defaultEventRetentionDays = 90

// EventPruneWorker works events.PruneArgs.
type EventPruneWorker struct {
	river.WorkerDefaults[events.PruneArgs]
	deps Deps
}

// NewEventPruneWorker returns the worker (tests run its Work directly).
func NewEventPruneWorker(deps Deps) *EventPruneWorker {
	return &EventPruneWorker{deps: deps.withDefaults()}
}

// Timeout implements river.Worker: a large backlog is drained in batches,
// and a run cut short is finished by the next one.
func (w *EventPruneWorker) Timeout(*river.Job[events.PruneArgs]) time.Duration {
	return 10 * time.Minute
}

// Work deletes, in batches of events.PruneBatchSize, every event created
// before the retention cutoff except unacknowledged alerts.
func (w *EventPruneWorker) Work(ctx context.Context, job *river.Job[events.PruneArgs]) error {
	now := w.deps.Now
	days := defaultEventRetentionDays
	if w.deps.Settings.EventRetentionDays > 0 {
		days = w.deps.Settings.EventRetentionDays
	}
	cutoff := now().UTC().AddDate(0, 0, -days)
	n, err := events.Prune(ctx, w.deps.Pool, cutoff, events.PruneBatchSize)
	w.deps.Logger.InfoContext(ctx, "pruned events", slog.Int64("events", n), slog.Time("before", cutoff))
	if err != nil {
		return err
	}
	// Plans keep events for less than the global maximum: each plan's
	// accounts are pruned to the plan's own retention.
	def := w.deps.defaultPlan()
	for _, p := range plans.All() {
		planDays := p.RetentionDays(days)
		if planDays >= days {
			continue
		}
		planCutoff := now().UTC().AddDate(0, 0, -planDays)
		n, err := events.PruneForPlan(ctx, w.deps.Pool, p.Name, def, planCutoff, events.PruneBatchSize)
		w.deps.Logger.InfoContext(ctx, "pruned events", slog.String("plan", p.Name), slog.Int64("events", n), slog.Time("before", planCutoff))
		if err != nil {
			return err
		}
	}
	return nil
}

// EventRollupRebuildWorker works events.RollupRebuildArgs.
type EventRollupRebuildWorker struct {
	river.WorkerDefaults[events.RollupRebuildArgs]
	deps Deps
}

// Work rebuilds the account's hourly event counters (events.RebuildRollups)
// and records how many it corrected. An account gone meanwhile has none.
func (w *EventRollupRebuildWorker) Work(ctx context.Context, job *river.Job[events.RollupRebuildArgs]) error {
	n, err := events.RebuildRollups(ctx, w.deps.Pool, job.Args.AccountID)
	if err != nil {
		return err
	}
	if n > 0 {
		w.deps.Logger.WarnContext(ctx, "event counters corrected", slog.String("account_id", job.Args.AccountID.String()),
			slog.Int64("counters", n))
	}
	return river.RecordOutput(ctx, map[string]int64{"corrected": n})
}

// EventRollupRebuildAllWorker works events.RollupRebuildAllArgs.
type EventRollupRebuildAllWorker struct {
	river.WorkerDefaults[events.RollupRebuildAllArgs]
	deps Deps
}

// Work queues a rebuild of every account (events.QueueRollupRebuilds).
func (w *EventRollupRebuildAllWorker) Work(ctx context.Context, _ *river.Job[events.RollupRebuildAllArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	queued, err := events.QueueRollupRebuilds(ctx, w.deps.Pool, client)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int{"queued": queued})
}

// addEventWorkers registers this feature's workers.
func addEventWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &EventPruneWorker{deps: deps})
	river.AddWorker(w, &EventRollupRebuildWorker{deps: deps})
	river.AddWorker(w, &EventRollupRebuildAllWorker{deps: deps})
}

// eventPeriodicJobs returns this feature's schedules: retention hourly, so
// each run only has an hour's worth of expired events to delete.
func eventPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return events.PruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "event_prune"}),
	}
}
