package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

// addReportWorkers registers this feature's workers.
func addReportWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &SubdomainLookupWorker{deps: deps})
	river.AddWorker(w, &ReportParseWorker{deps: deps})
	river.AddWorker(w, &ReportReparseWorker{deps: deps})
	river.AddWorker(w, &ReportRawPruneWorker{deps: deps})
	river.AddWorker(w, &ReportAddressMintWorker{deps: deps})
	river.AddWorker(w, &ReportSummaryWorker{deps: deps})
	river.AddWorker(w, &DMARCDaysBackfillWorker{deps: deps})
	river.AddWorker(w, &DMARCReportersWatchWorker{deps: deps})
	river.AddWorker(w, &DKIMSelectorsIdleWorker{deps: deps})
}

// reportPeriodicJobs returns this feature's schedules: the kept raw bytes
// of failed reports are pruned daily, and every domain's reporting
// addresses are minted at start and hourly (after an upgrade or a key
// rotation, before anyone reads them).
func reportPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return ReportRawPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "report_raw_prune"}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return ReportAddressMintArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "reporting_address_mint"}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return DMARCDaysBackfillArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "dmarc_days_backfill"}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return DMARCReportersWatchArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "dmarc_reporters_watch"}),
		river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return DKIMSelectorsIdleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "dkim_selectors_idle"}),
	}
}

// ReportParseWorker parses one received DMARC or TLS report
// (reports.ParseArgs). Parsing is idempotent: a re-run from River UI of a
// parsed report changes nothing; a run killed mid-way left nothing behind
// (the write is one transaction) and the rescued job parses once.
type ReportParseWorker struct {
	river.WorkerDefaults[reports.ParseArgs]
	deps Deps
}

// Timeout bounds one parse: the largest report takes well under a second,
// reverse DNS of its failing sources a few more.
func (w *ReportParseWorker) Timeout(*river.Job[reports.ParseArgs]) time.Duration {
	return 2 * time.Minute
}

// Work parses the report. Permanent problems are stored on the report with
// their reason by reports.Service.Parse and end the job; a report that no
// longer exists cancels it; anything else is retried.
func (w *ReportParseWorker) Work(ctx context.Context, job *river.Job[reports.ParseArgs]) error {
	svc := reportService(w.deps)
	out, err := svc.Parse(ctx, job.Args.MessageID)
	if errors.Is(err, reports.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "report parsed", slog.String("message_id", job.Args.MessageID.String()),
		slog.String("status", out.Status), slog.String("type", out.ReportType), slog.String("reason", out.Reason),
		slog.Bool("already", out.Already), slog.Bool("raw_kept", out.RawKept))
	return nil
}

// ReportReparseWorker works reports.ReparseArgs.
type ReportReparseWorker struct {
	river.WorkerDefaults[reports.ReparseArgs]
	deps Deps
}

// Work walks the failed reports once, in (domain, id) order. It is
// idempotent: a report it moved is pending (its parse queued) or parsed,
// so a second run, or a rescued one, queues only reports still failed.
func (w *ReportReparseWorker) Work(ctx context.Context, _ *river.Job[reports.ReparseArgs]) error {
	svc := reportService(w.deps)
	var cursor reports.RequeueCursor
	queued := 0
	for {
		var n int
		var next reports.RequeueCursor
		err := dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			n, next, err = svc.Requeue(ctx, tx, cursor, reports.RequeueBatch)
			return err
		})
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		queued += n
		cursor = next
	}
	w.deps.Logger.InfoContext(ctx, "failed reports queued for parsing again", slog.Int("reports", queued))
	return river.RecordOutput(ctx, map[string]int{"queued": queued})
}

// ReportRawPruneArgs drops the kept raw bytes of failed reports older than
// reports.FailedRawRetention.
type ReportRawPruneArgs struct{}

// Kind implements river.JobArgs.
func (ReportRawPruneArgs) Kind() string { return "report_raw_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReportRawPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// ReportRawPruneWorker works ReportRawPruneArgs.
type ReportRawPruneWorker struct {
	river.WorkerDefaults[ReportRawPruneArgs]
	deps Deps
}

// Work drops the bytes in batches of 100 rows (each up to 15 MB).
func (w *ReportRawPruneWorker) Work(ctx context.Context, _ *river.Job[ReportRawPruneArgs]) error {
	now := w.deps.Now
	cutoff := now().Add(-reports.FailedRawRetention)
	n, err := reports.PruneFailedRaw(ctx, w.deps.Pool, cutoff, 100)
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "pruned failed reports' raw bytes", slog.Int64("reports", n), slog.Time("before", cutoff))
	return river.RecordOutput(ctx, map[string]int64{"pruned": n})
}

// ReportAddressMintArgs mints the current key's reporting addresses of
// every domain lacking them (reports.Service.MintMissing).
type ReportAddressMintArgs struct{}

// Kind implements river.JobArgs.
func (ReportAddressMintArgs) Kind() string { return "reporting_address_mint" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReportAddressMintArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// ReportAddressMintWorker works ReportAddressMintArgs.
type ReportAddressMintWorker struct {
	river.WorkerDefaults[ReportAddressMintArgs]
	deps Deps
}

// Work mints in batches of 500 domains; each mint is two idempotent inserts.
func (w *ReportAddressMintWorker) Work(ctx context.Context, _ *river.Job[ReportAddressMintArgs]) error {
	n, err := reportService(w.deps).MintMissing(ctx, w.deps.Pool, 500)
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "minted missing reporting addresses", slog.Int("domains", n))
	return river.RecordOutput(ctx, map[string]int{"domains": n})
}

// DMARCDaysBackfillArgs rebuilds the daily DMARC categories of the domains
// whose reports were stored before they were kept (reports.BackfillDays).
type DMARCDaysBackfillArgs struct{}

// Kind implements river.JobArgs.
func (DMARCDaysBackfillArgs) Kind() string { return "dmarc_days_backfill" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DMARCDaysBackfillArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// DMARCDaysBackfillWorker works DMARCDaysBackfillArgs.
type DMARCDaysBackfillWorker struct {
	river.WorkerDefaults[DMARCDaysBackfillArgs]
	deps Deps
}

// dmarcDaysBackfillBatch is the domains one run rebuilds before it hands
// over to a fresh run (a snooze of zero, which uses no attempt).
const dmarcDaysBackfillBatch = 50

// Work rebuilds up to dmarcDaysBackfillBatch domains, one transaction
// each; with more left it runs again at once. Without any it is a single
// empty read.
func (w *DMARCDaysBackfillWorker) Work(ctx context.Context, _ *river.Job[DMARCDaysBackfillArgs]) error {
	n, err := reports.BackfillDays(ctx, w.deps.Pool, dmarcDaysBackfillBatch)
	if err != nil {
		return err
	}
	if n > 0 {
		w.deps.Logger.InfoContext(ctx, "rebuilt daily DMARC volume", slog.Int("domains", n))
	}
	if err := river.RecordOutput(ctx, map[string]int{"domains": n}); err != nil {
		return err
	}
	if n == dmarcDaysBackfillBatch {
		return river.JobSnooze(0)
	}
	return nil
}

// DMARCReportersWatchArgs raises dmarc_reports_stopped for the daily
// reporters fallen silent (reports.WatchReporters).
type DMARCReportersWatchArgs struct{}

// Kind implements river.JobArgs.
func (DMARCReportersWatchArgs) Kind() string { return "dmarc_reporters_watch" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DMARCReportersWatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// DMARCReportersWatchWorker works DMARCReportersWatchArgs.
type DMARCReportersWatchWorker struct {
	river.WorkerDefaults[DMARCReportersWatchArgs]
	deps Deps
}

// Work watches in batches of 500 reporters per transaction.
func (w *DMARCReportersWatchWorker) Work(ctx context.Context, _ *river.Job[DMARCReportersWatchArgs]) error {
	n, err := reports.WatchReporters(ctx, w.deps.Pool, &events.Emitter{}, w.deps.Now(), 500)
	if err != nil {
		return err
	}
	if n > 0 {
		w.deps.Logger.InfoContext(ctx, "DMARC reporters fell silent", slog.Int("reporters", n))
	}
	return river.RecordOutput(ctx, map[string]int{"stopped": n})
}

// DKIMSelectorsIdleArgs raises dkim_selector_idle for the published
// selectors unseen in reports for 90 days (selectors.WatchIdle).
type DKIMSelectorsIdleArgs struct{}

// Kind implements river.JobArgs.
func (DKIMSelectorsIdleArgs) Kind() string { return "dkim_selectors_idle" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DKIMSelectorsIdleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// DKIMSelectorsIdleWorker works DKIMSelectorsIdleArgs.
type DKIMSelectorsIdleWorker struct {
	river.WorkerDefaults[DKIMSelectorsIdleArgs]
	deps Deps
}

// Work watches in batches of 500 selectors per transaction.
func (w *DKIMSelectorsIdleWorker) Work(ctx context.Context, _ *river.Job[DKIMSelectorsIdleArgs]) error {
	n, err := selectors.WatchIdle(ctx, w.deps.Pool, &events.Emitter{}, w.deps.Now(), 500)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int{"idle": n})
}

// ReportSummaryWorker works reports.SummaryArgs.
type ReportSummaryWorker struct {
	river.WorkerDefaults[reports.SummaryArgs]
	deps Deps
}

// Work computes the summary unless a current one is stored (a read got
// there first). A domain deleted meanwhile leaves nothing to store.
func (w *ReportSummaryWorker) Work(ctx context.Context, job *river.Job[reports.SummaryArgs]) error {
	computed, err := reportService(w.deps).Warm(ctx, job.Args.DomainID)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]bool{"computed": computed})
}

// reportService is the reports capability over the workers'
// dependencies.
func reportService(deps Deps) *reports.Service {
	deps = deps.withDefaults()
	svc := reports.NewService(deps.Pool, deps.Keyring, deps.Settings.InboundDomain)
	svc.Resolver, svc.Logger, svc.Now = deps.Resolver, deps.Logger, deps.Now
	// A new aggregate report moves the DMARC pass rate that caps the
	// health score: recompute it.
	svc.AfterAggregate = queueHealth
	return svc
}
