package deliveries

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// ReconcileArgs repairs delivery rows whose River job changed outside
// mailwatch (River UI, `mailwatch jobs`, the rescuer). Reconcile does the
// repair:
//
//   - pending/retrying, job cancelled, deleted, discarded or completed
//     without an outcome: the row is marked failed (an operator who cancels
//     or deletes a job means "stop"; the API's retry queues it again) and
//     webhook_delivery_failed is emitted;
//   - pending/retrying, job scheduled at another time than next_retry_at
//     (rescued, or snoozed): next_retry_at takes River's scheduled_at;
//   - failed, job queued again (an operator retried it): the row goes back
//     to retrying (pending when never attempted) at the job's time. The
//     worker does the same when the job runs; this only makes the row
//     right sooner.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "webhook_reconcile" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: ReconcileInterval}}
}

// reconcileBatch bounds the rows one run repairs.
const reconcileBatch = 1000

type reconcileRow struct {
	id          uuid.UUID
	status      string
	nextRetryAt *time.Time
	jobID       *int64
	jobState    *string
	scheduledAt *time.Time
}

const reconcileSelect = `
SELECT d.id, d.status, d.next_retry_at, d.job_id, j.state::text, j.scheduled_at
FROM webhook_deliveries d
LEFT JOIN river_job j ON j.id = d.job_id
WHERE d.updated_at < $1
  AND ((d.status IN ('pending', 'retrying')
        AND (j.id IS NULL
             OR j.state IN ('cancelled', 'discarded', 'completed')
             OR ((j.state IN ('retryable', 'scheduled') OR (j.state = 'available' AND d.status = 'retrying'))
                 AND j.scheduled_at IS DISTINCT FROM d.next_retry_at)))
    OR (d.status = 'failed' AND j.state IN ('available', 'retryable', 'scheduled')))
`

// Reconcile repairs the delivery rows last changed before
// changedBefore whose job disagrees with them, and returns how many it
// changed. em emits webhook_delivery_failed (a zero Emitter inside a
// River worker).
func Reconcile(ctx context.Context, pool dbutil.Executor, em *events.Emitter, changedBefore time.Time) (int, error) {
	rows, err := pool.Query(ctx, reconcileSelect+" ORDER BY d.updated_at LIMIT $2", changedBefore, reconcileBatch)
	if err != nil {
		return 0, fmt.Errorf("error finding deliveries to reconcile: %w", err)
	}
	var ids []uuid.UUID
	for rows.Next() {
		var r reconcileRow
		if err := rows.Scan(&r.id, &r.status, &r.nextRetryAt, &r.jobID, &r.jobState, &r.scheduledAt); err != nil {
			rows.Close()
			return 0, fmt.Errorf("error reading deliveries to reconcile: %w", err)
		}
		ids = append(ids, r.id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("error finding deliveries to reconcile: %w", err)
	}
	return reconcileIDs(ctx, pool, em, ids, changedBefore)
}

// ReconcileJobs repairs at once the delivery rows owned by these jobs,
// whatever their age: River UI and `mailwatch jobs` call it right after an
// operator cancelled, deleted or retried the jobs, so that the rows need not
// wait for the periodic reconciler. Jobs of other kinds own no delivery and
// are ignored. It returns how many rows it changed.
func ReconcileJobs(ctx context.Context, pool dbutil.Executor, em *events.Emitter, jobIDs []int64) (int, error) {
	if len(jobIDs) == 0 {
		return 0, nil
	}
	var ids []uuid.UUID
	rows, err := pool.Query(ctx, "SELECT id FROM webhook_deliveries WHERE job_id = ANY($1::bigint[]) ORDER BY id", jobIDs)
	if err != nil {
		return 0, fmt.Errorf("error finding deliveries of jobs: %w", err)
	}
	ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("error finding deliveries of jobs: %w", err)
	}
	// The operator's change is committed: no transition of ours can be in
	// progress on these rows that the row lock would not order.
	changedBefore := time.Now().Add(time.Hour)
	return reconcileIDs(ctx, pool, em, ids, changedBefore)
}

// reconcileIDs repairs these rows, each in its own transaction, and
// returns how many it changed.
func reconcileIDs(ctx context.Context, pool dbutil.Executor, em *events.Emitter, ids []uuid.UUID, changedBefore time.Time) (int, error) {
	changed := 0
	for _, id := range ids {
		ok, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return reconcileOne(ctx, tx, em, id, changedBefore)
		})
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	return changed, nil
}

// reconcileOne repairs one row if it still disagrees with its job.
func reconcileOne(ctx context.Context, tx pgx.Tx, em *events.Emitter, id uuid.UUID, changedBefore time.Time) (bool, error) {
	// Lock the row, then re-read both sides: either may have moved since
	// the scan.
	var r reconcileRow
	err := tx.QueryRow(ctx, reconcileSelect+" AND d.id = $2 FOR UPDATE OF d", changedBefore, id).
		Scan(&r.id, &r.status, &r.nextRetryAt, &r.jobID, &r.jobState, &r.scheduledAt)
	if dbutil.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error locking delivery to reconcile: %w", err)
	}
	q := dbsqlc.New()
	state := ""
	if r.jobState != nil {
		state = *r.jobState
	}
	switch {
	case r.status == StatusFailed:
		// Retried outside the API: queued again.
		if _, err := q.DeliveryRequeue(ctx, tx, dbsqlc.DeliveryRequeueParams{Ids: []uuid.UUID{id}, JobIds: []int64{*r.jobID}, NextRetryAt: *r.scheduledAt}); err != nil {
			return false, fmt.Errorf("error requeueing delivery: %w", err)
		}
		return true, nil
	case state == "retryable" || state == "scheduled" || state == "available":
		if err := q.DeliverySetNextRetry(ctx, tx, dbsqlc.DeliverySetNextRetryParams{ID: id, NextRetryAt: *r.scheduledAt}); err != nil {
			return false, fmt.Errorf("error setting next retry: %w", err)
		}
		return true, nil
	}
	msg, class := "its job was deleted outside the API", ErrorClassJobGone
	switch state {
	case "cancelled":
		msg, class = "its job was cancelled outside the API", ErrorClassJobCancelled
	case "discarded":
		msg, class = "its job was discarded after its last attempt was interrupted", ErrorClassJobGone
	case "completed":
		msg, class = "its job completed without recording an outcome", ErrorClassJobGone
	}
	d, err := q.DeliveryMarkFailed(ctx, tx, dbsqlc.DeliveryMarkFailedParams{ID: id, LastError: msg, LastErrorClass: class})
	if dbutil.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error failing delivery: %w", err)
	}
	sub, err := q.SubscriptionGetForDelivery(ctx, tx, d.SubscriptionID)
	if err != nil {
		return false, fmt.Errorf("error reading subscription: %w", err)
	}
	return true, EmitFailed(ctx, tx, em, d, sub)
}
