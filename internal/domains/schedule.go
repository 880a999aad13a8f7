package domains

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// ScheduleChecks inserts, for every domain, its check of the period that
// starts at or after now (see NextCheckAt), and returns how many were new.
// Each job is unique per (domain, period), so a scheduler run twice in one
// period (a new leader, a restart, an operator) adds nothing.
func ScheduleChecks(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], interval time.Duration, now time.Time) (int, error) {
	return insertChecks(ctx, db, client, func(id uuid.UUID) *river.InsertOpts {
		return &river.InsertOpts{
			Queue:       queues.DNS,
			MaxAttempts: checkMaxAttempts,
			ScheduledAt: NextCheckAt(id, interval, now),
			UniqueOpts:  river.UniqueOpts{ByArgs: true, ByPeriod: interval},
		}
	})
}

// RecheckAll inserts a check, due now, of every domain and returns how many
// were queued: a domain whose check is in one of active (already queued or
// running) is not queued twice.
func RecheckAll(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], active []rivertype.JobState) (int, error) {
	return insertChecks(ctx, db, client, func(uuid.UUID) *river.InsertOpts {
		return &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: active}}
	})
}

// insertChecks inserts a CheckArgs for every domain, ScheduleBatch at a
// time, with the options opts gives it, and counts those not skipped as
// duplicates.
func insertChecks(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], opts func(uuid.UUID) *river.InsertOpts) (int, error) {
	q := dbsqlc.New()
	inserted := 0
	after := uuid.Nil
	for {
		ids, err := q.DomainIDsAfter(ctx, db, dbsqlc.DomainIDsAfterParams{After: after, MaxRows: ScheduleBatch})
		if err != nil {
			return inserted, fmt.Errorf("error listing domains: %w", err)
		}
		if len(ids) == 0 {
			return inserted, nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: CheckArgs{DomainID: id}, InsertOpts: opts(id)}
		}
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return inserted, fmt.Errorf("error inserting domain checks: %w", err)
		}
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				inserted++
			}
		}
		after = ids[len(ids)-1]
	}
}

// ScheduleMXVerifications queues an MXVerifyArgs for every pending,
// verified or lost MX setup.
func ScheduleMXVerifications(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx]) error {
	q := dbsqlc.New()
	after := uuid.Nil
	for {
		ids, err := q.MXSetupIDsToVerify(ctx, db, dbsqlc.MXSetupIDsToVerifyParams{After: after, MaxRows: ScheduleBatch})
		if err != nil {
			return fmt.Errorf("error listing MX setups: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: MXVerifyArgs{SetupID: id}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("error queueing MX verifications: %w", err)
		}
		after = ids[len(ids)-1]
	}
}
