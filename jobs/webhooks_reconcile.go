package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
)

// DeliveryReconcileWorker works deliveries.ReconcileArgs: it makes
// delivery rows agree with their jobs (deliveries.Reconcile says how).
type DeliveryReconcileWorker struct {
	river.WorkerDefaults[deliveries.ReconcileArgs]
	deps Deps
}

// Work repairs a batch of rows last changed before the reconcile grace,
// each in its own transaction.
func (w *DeliveryReconcileWorker) Work(ctx context.Context, job *river.Job[deliveries.ReconcileArgs]) error {
	n, err := deliveries.Reconcile(ctx, w.deps.Pool, &events.Emitter{}, time.Now().Add(-deliveries.ReconcileGrace))
	if err != nil {
		return err
	}
	if n > 0 {
		w.deps.Logger.InfoContext(ctx, "reconciled webhook deliveries", slog.Int("rows", n))
	}
	return nil
}
