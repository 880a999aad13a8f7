package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// addReportWorkers registers this feature's workers.
func addReportWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &ReportParseWorker{deps: deps})
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
	svc := ReportService(w.deps)
	out, err := svc.Parse(ctx, job.Args.MessageID)
	if errors.Is(err, reports.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "report parsed", slog.String("message_id", job.Args.MessageID.String()),
		slog.String("status", out.Status), slog.String("type", out.ReportType), slog.String("reason", out.Reason),
		slog.Bool("already", out.Already))
	return nil
}

// ReportService is the reports capability over the workers' dependencies.
func ReportService(deps Deps) *reports.Service {
	svc := &reports.Service{
		DB: deps.Pool, Emitter: &events.Emitter{}, Resolver: deps.Resolver, Logger: deps.Logger, Now: deps.Now,
		// A new aggregate report moves the DMARC pass rate that caps the
		// health score: recompute it.
		AfterAggregate: func(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error {
			client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
			if err != nil {
				return nil // outside a worker (tests, tools): nothing to queue with
			}
			_, err = client.InsertTx(ctx, tx, DomainHealthArgs{DomainID: domainID}, nil)
			return err
		},
	}
	if deps.Keyring != nil {
		svc.Signer = &reports.Signer{Keyring: deps.Keyring}
		if deps.Config != nil {
			svc.Signer.Domain = deps.Config.InboundDomain
		}
	}
	return svc
}
