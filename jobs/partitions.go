package jobs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/partitions"
)

// PartitionMaintainWorker works partitions.MaintainArgs.
type PartitionMaintainWorker struct {
	river.WorkerDefaults[partitions.MaintainArgs]
	deps    Deps
	changes *prometheus.CounterVec
}

// NewPartitionMaintainWorker returns the worker (tests run its Work directly).
func NewPartitionMaintainWorker(deps Deps) *PartitionMaintainWorker {
	deps = deps.withDefaults()
	return &PartitionMaintainWorker{deps: deps, changes: newPartitionMetrics(deps)}
}

// newPartitionMetrics counts the partition changes a worker makes.
func newPartitionMetrics(deps Deps) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mailwatch_partition_changes_total",
		Help: "Partitions created, dropped, and changes skipped after waiting too long for their locks (retried at the next hourly run), by the partition maintenance job.",
	}, []string{"change"})
	if deps.Registry != nil {
		c = register(deps.Registry, c)
	}
	return c
}

// Work creates the partitions ahead of the clock and drops the expired
// ones (EVENT_RETENTION_DAYS, or its default, for the tables that follow
// it). A change that waited too long for its lock is logged and left to the
// next run.
func (w *PartitionMaintainWorker) Work(ctx context.Context, _ *river.Job[partitions.MaintainArgs]) error {
	days := defaultEventRetentionDays
	if w.deps.Settings.EventRetentionDays > 0 {
		days = w.deps.Settings.EventRetentionDays
	}
	start := time.Now()
	rep, err := partitions.Maintain(ctx, w.deps.Pool, w.deps.Now(), partitions.Settings{EventRetentionDays: days})
	attrs := []any{
		slog.Int("created", len(rep.Created)), slog.Int("dropped", len(rep.Dropped)),
		slog.Int64("moved_rows", rep.Moved), slog.Int64("kept_rows", rep.Kept), slog.Int64("rollup_rows", rep.RollupRows),
		slog.Duration("elapsed", time.Since(start)),
	}
	if len(rep.Created) > 0 {
		attrs = append(attrs, slog.String("created_partitions", strings.Join(rep.Created, ",")))
	}
	if len(rep.Dropped) > 0 {
		attrs = append(attrs, slog.String("dropped_partitions", strings.Join(rep.Dropped, ",")))
	}
	if len(rep.Analyzed) > 0 {
		attrs = append(attrs, slog.String("analyzed_tables", strings.Join(rep.Analyzed, ",")), slog.Duration("analyze_elapsed", rep.AnalyzeTook))
	}
	w.changes.WithLabelValues("created").Add(float64(len(rep.Created)))
	w.changes.WithLabelValues("dropped").Add(float64(len(rep.Dropped)))
	w.changes.WithLabelValues("skipped").Add(float64(len(rep.Skipped)))
	if len(rep.Skipped) > 0 {
		w.deps.Logger.WarnContext(ctx, "partition changes waited too long for their locks; the next run retries them",
			slog.String("skipped", strings.Join(rep.Skipped, ",")))
	}
	w.deps.Logger.InfoContext(ctx, "maintained partitions", attrs...)
	return err
}

// addPartitionWorkers registers this feature's workers.
func addPartitionWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, NewPartitionMaintainWorker(deps))
}

// partitionPeriodicJobs returns this feature's schedule: hourly, and at
// start, so a new database gets its partitions from the first worker.
func partitionPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return partitions.MaintainArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "partition_maintain"}),
	}
}
