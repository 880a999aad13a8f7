package providers

import (
	"context"
	"fmt"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// PruneBatchSize is how many message events one DELETE of the prunes
// removes.
const PruneBatchSize = 5000

// PruneMessageEvents deletes message events that occurred before cutoff,
// batch by batch, and returns how many it deleted. Message events are
// dropped a partition at a time (internal/partitions); the job passes a
// cutoff below every range partition (partitions.PruneBefore), so this
// only empties the DEFAULT partition of expired rows.
func PruneMessageEvents(ctx context.Context, db dbutil.Executor, cutoff time.Time, batch int) (int64, error) {
	return pruneLoop(ctx, batch, func(n int32) (int64, error) {
		return dbsqlc.New().MessageEventPruneBefore(ctx, db, dbsqlc.MessageEventPruneBeforeParams{Before: cutoff, BatchSize: n})
	})
}

// PruneMessageEventsForPlan deletes the message events of the accounts on
// one plan (an account without a plan of its own is on defaultPlan) that
// occurred before cutoff: a plan's retention shorter than the fleet's.
func PruneMessageEventsForPlan(ctx context.Context, db dbutil.Executor, plan, defaultPlan string, cutoff time.Time, batch int) (int64, error) {
	return pruneLoop(ctx, batch, func(n int32) (int64, error) {
		return dbsqlc.New().MessageEventPruneBatchForPlan(ctx, db, dbsqlc.MessageEventPruneBatchForPlanParams{
			DefaultPlan: defaultPlan, Plan: plan, Before: cutoff, BatchSize: n})
	})
}

func pruneLoop(ctx context.Context, batch int, del func(n int32) (int64, error)) (int64, error) {
	if batch <= 0 {
		batch = PruneBatchSize
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := del(int32(batch))
		if err != nil {
			return total, fmt.Errorf("error pruning message events: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
