package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// Account deletion and the maintenance tasks an admin runs now
// (POST /api/admin/maintenance/{task}).

// accountDeleteBudget is how long one run of accounts.DeleteArgs purges
// before it hands over to a fresh run (a snooze of zero), well within
// MaxJobTimeout.
const accountDeleteBudget = 40 * time.Second

// AccountDeleteWorker works accounts.DeleteArgs.
type AccountDeleteWorker struct {
	river.WorkerDefaults[accounts.DeleteArgs]
	deps Deps
}

// AccountDeleteOutput is the job's River output.
type AccountDeleteOutput struct {
	Done bool             `json:"done"`
	Rows map[string]int64 `json:"rows"`
}

// Work purges in batches for up to accountDeleteBudget; an unfinished
// purge snoozes for zero seconds, which River runs again at once without
// using an attempt. A run for an account already gone completes; a run for
// a live account (an operator's mistake) is cancelled and deletes nothing.
func (w *AccountDeleteWorker) Work(ctx context.Context, job *river.Job[accounts.DeleteArgs]) error {
	res, err := accounts.Purge(ctx, w.deps.Pool, job.Args.AccountID, accounts.PurgeOptions{
		Deadline: time.Now().Add(accountDeleteBudget),
	})
	if errors.Is(err, accounts.ErrNotDeleting) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if err := river.RecordOutput(ctx, AccountDeleteOutput{Done: res.Done, Rows: res.Rows}); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	if !res.Done {
		return river.JobSnooze(0)
	}
	if w.deps.Logger != nil {
		w.deps.Logger.InfoContext(ctx, "account deleted", slog.String("account_id", job.Args.AccountID.String()))
	}
	return nil
}

// DomainRecheckAllWorker works domains.RecheckAllArgs.
type DomainRecheckAllWorker struct {
	river.WorkerDefaults[domains.RecheckAllArgs]
	deps Deps
}

// Work queues a check of every domain (domains.RecheckAll). A domain whose
// check is already queued or running is not queued twice.
func (w *DomainRecheckAllWorker) Work(ctx context.Context, _ *river.Job[domains.RecheckAllArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	queued, err := domains.RecheckAll(ctx, w.deps.Pool, client, activeStates)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int{"queued": queued})
}

// activeStates are the states in which a job counts as "already queued"
// for a run-now request: River's required unique states plus retryable.
var activeStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled,
}

// RunNowOpts are the insert options of a maintenance task run by hand: a
// task already queued or running is not queued twice (its job is
// returned), and the periodic schedule's own uniqueness is not in the way.
func RunNowOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByState: activeStates}}
}

// QueueVacuumAfter is how long a finished River job (completed, cancelled
// or discarded) is kept before vacuum-queues deletes it. River's own
// cleaner deletes them after a day (a week for discarded ones); the task
// clears them sooner on demand, e.g. after a burst.
const QueueVacuumAfter = time.Hour

// QueueVacuumArgs deletes finished River jobs older than QueueVacuumAfter
// (the maintenance task vacuum-queues). It deletes rows only; Postgres'
// autovacuum reclaims the space, so no VACUUM runs under a job.
type QueueVacuumArgs struct{}

// Kind implements river.JobArgs.
func (QueueVacuumArgs) Kind() string { return "queue_vacuum" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (QueueVacuumArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance}
}

// QueueVacuumWorker works QueueVacuumArgs.
type QueueVacuumWorker struct {
	river.WorkerDefaults[QueueVacuumArgs]
	deps Deps
}

// Work deletes in batches of 1,000 rows, each its own statement.
func (w *QueueVacuumWorker) Work(ctx context.Context, _ *river.Job[QueueVacuumArgs]) error {
	n, err := VacuumQueues(ctx, w.deps.Pool, time.Now().Add(-QueueVacuumAfter), 1000)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int64{"deleted": n})
}

// VacuumQueues deletes finished jobs finalized before cutoff, batch rows
// per statement, and returns how many it deleted.
func VacuumQueues(ctx context.Context, db dbutil.Executor, cutoff time.Time, batch int) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, `DELETE FROM river_job WHERE id = ANY(ARRAY(
    SELECT id FROM river_job WHERE state IN ('completed', 'cancelled', 'discarded') AND finalized_at < $1 LIMIT $2))`, cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("error deleting finished jobs: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			return total, nil
		}
	}
}

// QueueStat is the number of jobs of one queue in one state.
type QueueStat struct {
	Queue string
	State string
	Count int64
	// OldestAvailableAt is the scheduled time of the oldest available job
	// (state available only).
	OldestAvailableAt *time.Time
}

// QueueStats counts the jobs of every queue by state.
func QueueStats(ctx context.Context, db dbutil.Executor) ([]QueueStat, error) {
	rows, err := db.Query(ctx, `SELECT queue, state::text, count(*),
       min(scheduled_at) FILTER (WHERE state = 'available')
FROM river_job GROUP BY queue, state ORDER BY queue, state`)
	if err != nil {
		return nil, fmt.Errorf("error counting jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueStat, error) {
		var s QueueStat
		err := r.Scan(&s.Queue, &s.State, &s.Count, &s.OldestAvailableAt)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("error counting jobs: %w", err)
	}
	return out, nil
}

// addAdminWorkers registers account deletion and the maintenance workers.
func addAdminWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &AccountDeleteWorker{deps: deps})
	river.AddWorker(w, &DomainRecheckAllWorker{deps: deps})
	river.AddWorker(w, &QueueVacuumWorker{deps: deps})
}
