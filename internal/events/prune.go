package events

import (
	"context"
	"fmt"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// PruneBatchSize is how many events one DELETE of Prune removes: small
// enough that each statement holds its locks briefly and never bloats one
// transaction, large enough that a backlog drains quickly.
const PruneBatchSize = 5000

// Prune deletes events created before cutoff, and their deliveries, batch
// by batch, keeping unacknowledged alerts (they still need a person's
// attention). It stops between batches when ctx ends and returns how many
// events it deleted. The job passes a cutoff below every range partition
// (partitions.PruneBefore): the weeks past the retention are dropped whole.
func Prune(ctx context.Context, db dbutil.Executor, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = PruneBatchSize
	}
	q := dbsqlc.New()
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := q.EventPruneBatch(ctx, db, dbsqlc.EventPruneBatchParams{Before: cutoff, BatchSize: int32(batch)})
		if err != nil {
			return total, fmt.Errorf("error pruning events: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// PruneForPlan is Prune for the accounts on one plan (an account without
// a plan of its own is on defaultPlan), with that plan's cutoff.
func PruneForPlan(ctx context.Context, db dbutil.Executor, plan, defaultPlan string, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = PruneBatchSize
	}
	q := dbsqlc.New()
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := q.EventPruneBatchForPlan(ctx, db, dbsqlc.EventPruneBatchForPlanParams{Before: cutoff, DefaultPlan: defaultPlan, Plan: plan, BatchSize: int32(batch)})
		if err != nil {
			return total, fmt.Errorf("error pruning %s events: %w", plan, err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
