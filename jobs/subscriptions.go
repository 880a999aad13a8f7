package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/subscriptions"
)

// RetireSecretWorker retires a subscription's replaced signing secret when
// its rotation's grace period ends (subscriptions.RetireSecretArgs).
type RetireSecretWorker struct {
	river.WorkerDefaults[subscriptions.RetireSecretArgs]
	deps Deps
}

// Work drops the replaced secret if its grace is over. A job that runs
// early (an operator in River UI) or after a newer rotation finds nothing
// due; the rotation that made the newer grace scheduled its own job.
func (w *RetireSecretWorker) Work(ctx context.Context, job *river.Job[subscriptions.RetireSecretArgs]) error {
	retired, err := subscriptions.RetireSecret(ctx, w.deps.Pool, job.Args.SubscriptionID, w.deps.Now())
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]bool{"retired": retired})
}
