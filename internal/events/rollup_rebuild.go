package events

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// RebuildRollups recomputes the account's hourly event counters from its
// raw rows, and its daily counters from those, and returns how many of
// both it corrected (0 when they were right). It is one statement, so one
// transaction when db is a pool; inside a caller's transaction, that
// transaction must be READ COMMITTED. While it runs it holds back new
// events of the account (and waits for those in flight):
// event_counts_hourly_rebuild (schema/0030_event_rollups.sql, replaced by
// 0036_event_daily_rollups.sql) explains the locks. Other accounts are not
// held back.
func RebuildRollups(ctx context.Context, db dbutil.Executor, account uuid.UUID) (int64, error) {
	n, err := dbsqlc.New().EventRollupRebuild(ctx, db, account)
	if err != nil {
		return 0, fmt.Errorf("error rebuilding the event counters of account %s: %w", account, err)
	}
	return n, nil
}

// RebuildOpenCounts recounts the account's open alerts and open webhook
// deliveries (the counters the dashboard summary reads, schema
// 0043_open_counts.sql) from the raw rows and returns how many keys it
// corrected. It is one statement of its own: it waits for the account's
// writers of those counters in flight and holds back new ones until it
// commits, and takes no other lock, so it is never run in the transaction
// of RebuildRollups (whose account lock the writers take in the other
// order).
func RebuildOpenCounts(ctx context.Context, db dbutil.Executor, account uuid.UUID) (int64, error) {
	n, err := dbsqlc.New().OpenCountsRebuild(ctx, db, account)
	if err != nil {
		return 0, fmt.Errorf("error rebuilding the open counts of account %s: %w", account, err)
	}
	return n, nil
}

// RollupRebuildArgs rebuilds one account's hourly event counters
// (RebuildRollups) and its open counts (RebuildOpenCounts). The worker is jobs.EventRollupRebuildWorker.
type RollupRebuildArgs struct {
	AccountID uuid.UUID `json:"account_id"`
}

// Kind implements river.JobArgs.
func (RollupRebuildArgs) Kind() string { return "event_rollup_rebuild" }

// InsertOpts implements river.JobArgsWithInsertOpts: an account's rebuild
// already queued or running is not queued twice.
func (RollupRebuildArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: queues.ActiveStates}}
}

// RollupRebuildAllArgs queues a RollupRebuildArgs for every account (the
// maintenance task rebuild-event-rollups), so that each account is rebuilt
// in a short transaction of its own. The worker is
// jobs.EventRollupRebuildAllWorker.
type RollupRebuildAllArgs struct{}

// Kind implements river.JobArgs.
func (RollupRebuildAllArgs) Kind() string { return "event_rollup_rebuild_all" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RollupRebuildAllArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance}
}

// rebuildBatch is how many accounts' rebuild jobs one insert queues.
const rebuildBatch = 1000

// QueueRollupRebuilds inserts a RollupRebuildArgs for every account, in id
// order, rebuildBatch at a time, and returns how many it queued: an
// account whose rebuild is already queued or running is not queued twice.
func QueueRollupRebuilds(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx]) (int, error) {
	q := dbsqlc.New()
	queued := 0
	after := uuid.Nil
	for {
		ids, err := q.EventRollupAccountsAfter(ctx, db, dbsqlc.EventRollupAccountsAfterParams{After: after, Max: rebuildBatch})
		if err != nil {
			return queued, fmt.Errorf("error listing accounts: %w", err)
		}
		if len(ids) == 0 {
			return queued, nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: RollupRebuildArgs{AccountID: id}}
		}
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return queued, fmt.Errorf("error queueing event counter rebuilds: %w", err)
		}
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				queued++
			}
		}
		after = ids[len(ids)-1]
	}
}
