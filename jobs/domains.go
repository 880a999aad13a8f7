package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
)

// addDomainWorkers registers this feature's workers.
func addDomainWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &DomainCheckWorker{deps: deps, metrics: newDomainMetrics(deps)})
	river.AddWorker(w, &DomainHealthWorker{deps: deps})
	river.AddWorker(w, &DomainScheduleWorker{deps: deps})
	river.AddWorker(w, &DomainHealthPruneWorker{deps: deps})
}

// domainPeriodicJobs returns this feature's schedules.
func domainPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(deps.dnsCheckInterval()), func() (river.JobArgs, *river.InsertOpts) {
			return domains.ScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "domain_check_schedule"}),
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return domains.HealthPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "domain_health_prune"}),
	}
}

func (d Deps) dnsCheckInterval() time.Duration {
	if d.Settings.DNSCheckInterval > 0 {
		return d.Settings.DNSCheckInterval
	}
	return domains.DefaultCheckInterval
}

// domainChecker is the domains.Checker of a worker.
func (d Deps) domainChecker() *domains.Checker {
	return &domains.Checker{
		DB: d.Pool, Resolver: d.Resolver, MTASTS: d.MTASTSClient, Signer: reportService(d).Signer,
		Emitter: &events.Emitter{}, Fixes: d.DNSFix, Logger: d.Logger, Now: d.Now,
	}
}

// DomainCheckWorker works domains.CheckArgs.
type DomainCheckWorker struct {
	river.WorkerDefaults[domains.CheckArgs]
	deps    Deps
	metrics *domainMetrics
}

// Timeout implements river.Worker: the checks have their own budget; this
// leaves room for the transaction.
func (w *DomainCheckWorker) Timeout(*river.Job[domains.CheckArgs]) time.Duration {
	return domains.CheckBudget + 50*time.Second
}

// Work runs domains.Checker.Run; the transaction that applies the check
// also completes the job.
func (w *DomainCheckWorker) Work(ctx context.Context, job *river.Job[domains.CheckArgs]) error {
	if w.deps.Resolver == nil {
		return errors.New("no DNS resolver configured")
	}
	row, err := dbsqlc.New().DomainGetByID(ctx, w.deps.Pool, job.Args.DomainID)
	if dbutil.IsNotFound(err) {
		return nil // deleted since: nothing to converge
	}
	if err != nil {
		return fmt.Errorf("error reading domain: %w", err)
	}
	run, err := w.deps.domainChecker().Run(ctx, row, completeJob(job))
	if errors.Is(err, domains.ErrDomainGone) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.metrics != nil {
		w.metrics.observe(run.Results, run.Elapsed, len(run.Changes))
	}
	attrs := []any{slog.String("domain", row.Name), slog.Duration("elapsed", run.Elapsed), slog.Bool("applied", run.Applied), slog.Int("changes", len(run.Changes))}
	if run.Health != nil {
		attrs = append(attrs, slog.Int("score", run.Health.Score))
	}
	w.deps.Logger.InfoContext(ctx, "checked domain", attrs...)
	return nil
}

// DomainHealthWorker works domains.HealthArgs.
type DomainHealthWorker struct {
	river.WorkerDefaults[domains.HealthArgs]
	deps Deps
}

// Work recomputes the score in one transaction that also completes the
// job.
func (w *DomainHealthWorker) Work(ctx context.Context, job *river.Job[domains.HealthArgs]) error {
	err := completeInTx(ctx, w.deps.Pool, job, func(ctx context.Context, tx pgx.Tx) error {
		_, err := domains.Score(ctx, tx, &events.Emitter{}, job.Args.DomainID, w.deps.Now())
		return err
	})
	if errors.Is(err, domains.ErrDomainGone) {
		return nil
	}
	return err
}

// DomainScheduleWorker works domains.ScheduleArgs.
type DomainScheduleWorker struct {
	river.WorkerDefaults[domains.ScheduleArgs]
	deps Deps
}

// Work enqueues every domain's next periodic check (domains.ScheduleChecks).
func (w *DomainScheduleWorker) Work(ctx context.Context, job *river.Job[domains.ScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	n, err := domains.ScheduleChecks(ctx, w.deps.Pool, client, w.deps.dnsCheckInterval(), w.deps.Now())
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "scheduled domain checks", slog.Int("inserted", n), slog.Duration("interval", w.deps.dnsCheckInterval()))
	return nil
}

// DomainHealthPruneWorker works domains.HealthPruneArgs.
type DomainHealthPruneWorker struct {
	river.WorkerDefaults[domains.HealthPruneArgs]
	deps Deps
}

// Work deletes health history older than the retention.
func (w *DomainHealthPruneWorker) Work(ctx context.Context, job *river.Job[domains.HealthPruneArgs]) error {
	days := domains.DefaultHealthHistoryDays
	if w.deps.Settings.HealthHistoryDays > 0 {
		days = w.deps.Settings.HealthHistoryDays
	}
	before := w.deps.Now().UTC().Add(-time.Duration(days) * 24 * time.Hour)
	n, err := dbsqlc.New().DomainHealthPrune(ctx, w.deps.Pool, before)
	if err != nil {
		return fmt.Errorf("error pruning health history: %w", err)
	}
	w.deps.Logger.InfoContext(ctx, "pruned health history", slog.Int64("rows", n), slog.Time("before", before))
	return nil
}
