package jobs

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/transport"
)

func addTransportWorkers(w *river.Workers, deps Deps) {
	if deps.Transport != nil {
		svc := *deps.Transport
		svc.AfterStore = queueHealth
		deps.Transport = &svc
	}
	river.AddWorker(w, &TransportProbeWorker{deps: deps})
	river.AddWorker(w, &TransportScheduleWorker{deps: deps})
}

// queueHealth queues a recompute of the domain's health score in tx, for
// the capabilities whose stored results move it (reports.Service's
// AfterAggregate, transport.Service's AfterStore). Outside a worker (tests,
// tools) there is no client to queue with, and nothing is queued.
func queueHealth(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil
	}
	_, err = client.InsertTx(ctx, tx, domains.HealthArgs{DomainID: domainID}, nil)
	return err
}

// transportPeriodicJobs schedules the MX probes every ProbeInterval; none
// when probing is off (SMTP_PROBE=off leaves Deps.Transport nil).
func transportPeriodicJobs(deps Deps) []*river.PeriodicJob {
	if deps.Transport == nil {
		return nil
	}
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(transport.ProbeInterval), func() (river.JobArgs, *river.InsertOpts) {
			return transport.ScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "transport_schedule"}),
	}
}

// TransportProbeWorker works transport.ProbeArgs.
type TransportProbeWorker struct {
	river.WorkerDefaults[transport.ProbeArgs]
	deps Deps
}

// Work probes the domain's MX hosts and stores the conclusive results
// (queueing the domain's health recompute with them, queueHealth). A probe
// queued before SMTP_PROBE was turned off completes without probing.
func (w *TransportProbeWorker) Work(ctx context.Context, job *river.Job[transport.ProbeArgs]) error {
	if w.deps.Transport == nil {
		w.deps.Logger.Info("transport probe skipped: SMTP_PROBE is off", slog.String("domain_id", job.Args.DomainID.String()))
		return nil
	}
	_, err := w.deps.Transport.ProbeDomain(ctx, w.deps.Pool, job.Args.DomainID)
	if errors.Is(err, transport.ErrNotFound) {
		return nil // deleted since
	}
	return err
}

// TransportScheduleWorker works transport.ScheduleArgs.
type TransportScheduleWorker struct {
	river.WorkerDefaults[transport.ScheduleArgs]
	deps Deps
}

// Work queues a probe of every domain, spread over the interval.
func (w *TransportScheduleWorker) Work(ctx context.Context, _ *river.Job[transport.ScheduleArgs]) error {
	if w.deps.Transport == nil {
		return nil
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	_, err = transport.Schedule(ctx, w.deps.Pool, client, w.deps.Now())
	return err
}
