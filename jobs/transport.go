package jobs

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/transport"
)

func addTransportWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &TransportProbeWorker{deps: deps})
	river.AddWorker(w, &TransportScheduleWorker{deps: deps})
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

// Work probes the domain's MX hosts and stores the conclusive results. A
// probe queued before SMTP_PROBE was turned off completes without probing.
func (w *TransportProbeWorker) Work(ctx context.Context, job *river.Job[transport.ProbeArgs]) error {
	if w.deps.Transport == nil {
		w.deps.Logger.Info("transport probe skipped: SMTP_PROBE is off", slog.String("domain_id", job.Args.DomainID.String()))
		return nil
	}
	out, err := w.deps.Transport.ProbeDomain(ctx, w.deps.Pool, job.Args.DomainID)
	if errors.Is(err, transport.ErrNotFound) {
		return nil // deleted since
	}
	if err != nil || out.Stored == 0 {
		return err
	}
	// Stored results move the transport cap of the health score: recompute
	// it now rather than at the domain's next DNS check.
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	_, err = client.Insert(ctx, domains.HealthArgs{DomainID: job.Args.DomainID}, nil)
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
