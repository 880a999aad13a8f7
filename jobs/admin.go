package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/accounts"
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

// accountDeleteOutput is the job's River output.
type accountDeleteOutput struct {
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
	if err := river.RecordOutput(ctx, accountDeleteOutput{Done: res.Done, Rows: res.Rows}); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	if !res.Done {
		return river.JobSnooze(0)
	}
	w.deps.Logger.InfoContext(ctx, "account deleted", slog.String("account_id", job.Args.AccountID.String()))
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
	queued, err := domains.RecheckAll(ctx, w.deps.Pool, client, queues.ActiveStates)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int{"queued": queued})
}

// QueueVacuumWorker works queues.VacuumArgs.
type QueueVacuumWorker struct {
	river.WorkerDefaults[queues.VacuumArgs]
	deps Deps
}

// Work deletes in batches of 1,000 rows, each its own statement.
func (w *QueueVacuumWorker) Work(ctx context.Context, _ *river.Job[queues.VacuumArgs]) error {
	n, err := queues.Vacuum(ctx, w.deps.Pool, time.Now().Add(-queues.VacuumAfter), 1000)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int64{"deleted": n})
}

// addAdminWorkers registers account deletion and the maintenance workers.
func addAdminWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &AccountDeleteWorker{deps: deps})
	river.AddWorker(w, &DomainRecheckAllWorker{deps: deps})
	river.AddWorker(w, &QueueVacuumWorker{deps: deps})
}
