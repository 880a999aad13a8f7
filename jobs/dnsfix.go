package jobs

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
)

func addDNSFixWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &DNSFixApplyWorker{deps: deps})
	river.AddWorker(w, &MXVerifyWorker{deps: deps})
	river.AddWorker(w, &MXScheduleWorker{deps: deps})
}

func dnsFixPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(domains.MXReverifyInterval), func() (river.JobArgs, *river.InsertOpts) {
			return domains.MXScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "mx_verify_schedule"}),
	}
}

// DNSFixApplyWorker works domains.FixApplyArgs.
type DNSFixApplyWorker struct {
	river.WorkerDefaults[domains.FixApplyArgs]
	deps Deps
}

// Work runs domains.ApplyFix; the transaction that records the outcome
// also completes the job. Only the last attempt records a network failure.
func (w *DNSFixApplyWorker) Work(ctx context.Context, job *river.Job[domains.FixApplyArgs]) error {
	if w.deps.DNSFix == nil || w.deps.DNSFix.Env == nil {
		return errors.New("DNS fixes are not configured in this worker")
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return domains.ApplyFix(ctx, w.deps.Pool, w.deps.DNSFix.Env, &events.Emitter{}, client, job.Args.RecommendationID,
		job.Attempt >= job.MaxAttempts, w.deps.Now, completeJob(job))
}

// MXVerifyWorker works domains.MXVerifyArgs.
type MXVerifyWorker struct {
	river.WorkerDefaults[domains.MXVerifyArgs]
	deps Deps
}

// Work looks the setup's records up and stores the new state (a DNS
// failure is retried, never a state change).
func (w *MXVerifyWorker) Work(ctx context.Context, job *river.Job[domains.MXVerifyArgs]) error {
	if w.deps.Resolver == nil || w.deps.DNSFix == nil {
		return errors.New("MX verification is not configured in this worker")
	}
	s, err := dbsqlc.New().MXSetupGetByIDForUpdate(ctx, w.deps.Pool, job.Args.SetupID)
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.State == dnsfix.MXFailed {
		return nil
	}
	_, err = dnsfix.VerifyMX(ctx, w.deps.Pool, w.deps.Resolver, &events.Emitter{}, w.deps.DNSFix.MX, s, w.deps.Now)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil
	}
	return err
}

// MXScheduleWorker works domains.MXScheduleArgs.
type MXScheduleWorker struct {
	river.WorkerDefaults[domains.MXScheduleArgs]
	deps Deps
}

// Work queues a verification of every pending, verified or lost setup.
func (w *MXScheduleWorker) Work(ctx context.Context, job *river.Job[domains.MXScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return domains.ScheduleMXVerifications(ctx, w.deps.Pool, client)
}
