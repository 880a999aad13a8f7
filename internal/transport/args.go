package transport

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// ProbeInterval is how often every domain's MX hosts are probed.
const ProbeInterval = 6 * time.Hour

// ProbeArgs probes one domain's MX hosts now (Service.ProbeDomain).
type ProbeArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (ProbeArgs) Kind() string { return "transport_probe" }

// InsertOpts implements river.JobArgsWithInsertOpts. A probe already
// queued or running for the domain is not queued twice; a failed one is
// retried a couple of times (the next period probes again anyway).
func (ProbeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Transport, MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: queues.ActiveStates}}
}

// ScheduleArgs queues one ProbeArgs per domain with stored MX results
// (Schedule), spread over ProbeInterval.
type ScheduleArgs struct{}

// Kind implements river.JobArgs.
func (ScheduleArgs) Kind() string { return "transport_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// Queue inserts jobs in a transaction (a River client).
type Queue interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// QueueProbe queues a probe of the domain, due now, in its own
// transaction, and returns the job's id (that of the probe already queued
// or running, if any).
func QueueProbe(ctx context.Context, db dbutil.Executor, q Queue, domainID uuid.UUID) (int64, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		res, err := q.InsertTx(ctx, tx, ProbeArgs{DomainID: domainID}, nil)
		if err != nil {
			return 0, fmt.Errorf("error queueing a transport probe: %w", err)
		}
		return res.Job.ID, nil
	})
}

// scheduleBatch is how many domains one insert queues.
const scheduleBatch = 500

// Schedule queues a probe of every domain for the next ProbeInterval, each
// at a stable offset within it (so probes of many domains do not start at
// once), and returns how many were queued.
func Schedule(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], now time.Time) (int, error) {
	q := dbsqlc.New()
	inserted, after := 0, uuid.Nil
	for {
		ids, err := q.DomainIDsAfter(ctx, db, dbsqlc.DomainIDsAfterParams{After: after, MaxRows: scheduleBatch})
		if err != nil {
			return inserted, fmt.Errorf("error listing domains: %w", err)
		}
		if len(ids) == 0 {
			return inserted, nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: ProbeArgs{DomainID: id}, InsertOpts: &river.InsertOpts{
				Queue: queues.Transport, MaxAttempts: 3, ScheduledAt: now.Add(offset(id, ProbeInterval)),
				UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: ProbeInterval},
			}}
		}
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return inserted, fmt.Errorf("error queueing transport probes: %w", err)
		}
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				inserted++
			}
		}
		after = ids[len(ids)-1]
	}
}

// offset is the domain's stable place within interval.
func offset(id uuid.UUID, interval time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write(id[:])
	return time.Duration(h.Sum64() % uint64(interval))
}
