package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/providers"
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

// Work deletes, in batches of events.PruneBatchSize, the events created
// before the retention cutoff (with their deliveries) except unacknowledged
// alerts: those of the accounts whose plan keeps them for less than
// EVENT_RETENTION_DAYS, and those no partition holds (the DEFAULT
// partition's); then the message events past theirs (pruneMessageEvents).
// The weeks past EVENT_RETENTION_DAYS are dropped whole by
// PartitionMaintainWorker.
func (w *EventPruneWorker) Work(ctx context.Context, job *river.Job[events.PruneArgs]) error {
	now := w.deps.Now
	days := w.retentionDays()
	// Weeks past the retention are dropped whole (PartitionMaintainWorker):
	// row by row, only what no partition holds.
	cutoff, err := partitions.PruneBefore(ctx, w.deps.Pool, "events", now().UTC().AddDate(0, 0, -days))
	if err != nil {
		return err
	}
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
	// Notification channels' records of alerts that are gone now.
	if n, err := channels.PruneAlerts(ctx, w.deps.Pool, now().Add(-24*time.Hour)); err != nil {
		return err
	} else if n > 0 {
		w.deps.Logger.InfoContext(ctx, "pruned notification channel alert records", slog.Int64("records", n))
	}
	return w.pruneMessageEvents(ctx, days)
}

// retentionDays is EVENT_RETENTION_DAYS, or its default.
func (w *EventPruneWorker) retentionDays() int {
	if w.deps.Settings.EventRetentionDays > 0 {
		return w.deps.Settings.EventRetentionDays
	}
	return defaultEventRetentionDays
}

// pruneMessageEvents deletes the message events past their retention
// (partitions.MessageEventRetention: the events', never less than the
// spike checks read) that no partition drop removes: those of the DEFAULT
// partition, and those of the accounts whose plan keeps events for less.
func (w *EventPruneWorker) pruneMessageEvents(ctx context.Context, days int) error {
	now := w.deps.Now().UTC()
	fleet := partitions.MessageEventRetention(partitions.Settings{EventRetentionDays: days})
	cutoff, err := partitions.PruneBefore(ctx, w.deps.Pool, "message_events", now.Add(-fleet))
	if err != nil {
		return err
	}
	n, err := providers.PruneMessageEvents(ctx, w.deps.Pool, cutoff, providers.PruneBatchSize)
	w.deps.Logger.InfoContext(ctx, "pruned message events", slog.Int64("message_events", n), slog.Time("before", cutoff))
	if err != nil {
		return err
	}
	def := w.deps.defaultPlan()
	for _, p := range plans.All() {
		keep := partitions.MessageEventRetention(partitions.Settings{EventRetentionDays: p.RetentionDays(days)})
		if keep >= fleet {
			continue
		}
		planCutoff := now.Add(-keep)
		n, err := providers.PruneMessageEventsForPlan(ctx, w.deps.Pool, p.Name, def, planCutoff, providers.PruneBatchSize)
		w.deps.Logger.InfoContext(ctx, "pruned message events", slog.String("plan", p.Name), slog.Int64("message_events", n), slog.Time("before", planCutoff))
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
// and then, in a transaction of its own, its open counts
// (events.RebuildOpenCounts), and records how many of each it corrected.
// An account gone meanwhile has none.
func (w *EventRollupRebuildWorker) Work(ctx context.Context, job *river.Job[events.RollupRebuildArgs]) error {
	n, err := events.RebuildRollups(ctx, w.deps.Pool, job.Args.AccountID)
	if err != nil {
		return err
	}
	open, err := events.RebuildOpenCounts(ctx, w.deps.Pool, job.Args.AccountID)
	if err != nil {
		return err
	}
	if n > 0 || open > 0 {
		w.deps.Logger.WarnContext(ctx, "event counters corrected", slog.String("account_id", job.Args.AccountID.String()),
			slog.Int64("counters", n), slog.Int64("open_counts", open))
	}
	return river.RecordOutput(ctx, map[string]int64{"corrected": n, "open_corrected": open})
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
