package reputation

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

// ScheduleInterval is how often every domain with DMARC data is checked;
// most pairs are then answered from the shared cache (DefaultInterval).
const ScheduleInterval = time.Hour

// scheduleBatch is the domains queued per insert.
const scheduleBatch = 500

// CheckArgs checks one domain's watched targets (Checker.Check).
type CheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (CheckArgs) Kind() string { return "reputation_check" }

// InsertOpts implements river.JobArgsWithInsertOpts: one check of a domain
// waits at a time; a finished one does not stop the next.
func (CheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Reputation, MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: queues.ActiveStates}}
}

// ScheduleArgs queues a CheckArgs per domain with DMARC data or a pin.
type ScheduleArgs struct{}

// Kind implements river.JobArgs.
func (ScheduleArgs) Kind() string { return "reputation_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Reputation, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// Schedule queues a check of every domain with DMARC data in the watch
// window or a pinned range.
func Schedule(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], now time.Time) error {
	q := dbsqlc.New()
	after := uuid.Nil
	since := now.UTC().Truncate(24 * time.Hour).Add(-WatchWindow)
	for {
		ids, err := q.ReputationDomainsToCheck(ctx, db, dbsqlc.ReputationDomainsToCheckParams{After: after, Since: since, MaxRows: scheduleBatch})
		if err != nil {
			return fmt.Errorf("listing domains to check for blocklists: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: CheckArgs{DomainID: id}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("queueing blocklist checks: %w", err)
		}
		after = ids[len(ids)-1]
	}
}

// Queue inserts jobs in a transaction (*river.Client[pgx.Tx] is one).
type Queue interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// QueueCheck queues a check of the domain now (the API's "check now"), in
// a transaction of db; a check already queued for it is reused.
func QueueCheck(ctx context.Context, db dbutil.Executor, q Queue, domainID uuid.UUID) (int64, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		res, err := q.InsertTx(ctx, tx, CheckArgs{DomainID: domainID}, nil)
		if err != nil {
			return 0, fmt.Errorf("queueing blocklist check: %w", err)
		}
		return res.Job.ID, nil
	})
}
