package jobs

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/reputation"
)

func addReputationWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &ReputationCheckWorker{deps: deps})
	river.AddWorker(w, &ReputationScheduleWorker{deps: deps})
}

func reputationPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(reputation.ScheduleInterval), func() (river.JobArgs, *river.InsertOpts) {
			return reputation.ScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "reputation_schedule"}),
	}
}

// ReputationCheckWorker works reputation.CheckArgs.
type ReputationCheckWorker struct {
	river.WorkerDefaults[reputation.CheckArgs]
	deps Deps
}

// Work checks the domain's watched targets; a domain deleted since is done.
func (w *ReputationCheckWorker) Work(ctx context.Context, job *river.Job[reputation.CheckArgs]) error {
	if w.deps.Reputation == nil {
		return errors.New("blocklist checks are not configured in this worker")
	}
	_, err := w.deps.Reputation.Check(ctx, w.deps.Pool, job.Args.DomainID, w.deps.Now())
	if errors.Is(err, reputation.ErrDomainNotFound) {
		return nil
	}
	return err
}

// ReputationScheduleWorker works reputation.ScheduleArgs.
type ReputationScheduleWorker struct {
	river.WorkerDefaults[reputation.ScheduleArgs]
	deps Deps
}

// Work queues a check of every domain with DMARC data.
func (w *ReputationScheduleWorker) Work(ctx context.Context, _ *river.Job[reputation.ScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return reputation.Schedule(ctx, w.deps.Pool, client, w.deps.Now())
}
