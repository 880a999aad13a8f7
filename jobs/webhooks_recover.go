package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/deliveries"
)

// addRecoverWorkers registers the recovery of a subscription's failed
// deliveries (POST .../event-subscriptions/{id}/recover).
func addRecoverWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &RecoverWorker{deps: deps.withDefaults()})
}

// RecoverWorker works deliveries.RecoverArgs: it queues again the failed
// deliveries of the range (deliveries.Recover) and records how many in its
// output, which River UI shows.
type RecoverWorker struct {
	river.WorkerDefaults[deliveries.RecoverArgs]
	deps Deps
}

// Work implements river.Worker.
func (w *RecoverWorker) Work(ctx context.Context, job *river.Job[deliveries.RecoverArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return fmt.Errorf("error finding River client: %w", err)
	}
	out, err := deliveries.Recover(ctx, w.deps.Pool, client, job.Args, w.deps.Now)
	if err != nil {
		return err
	}
	if err := river.RecordOutput(ctx, out); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	w.deps.Logger.InfoContext(ctx, "webhook deliveries recovered", "subscription_id", job.Args.SubscriptionID,
		"requeued", out.Requeued, "truncated", out.Truncated, "stopped", out.Stopped)
	return nil
}
