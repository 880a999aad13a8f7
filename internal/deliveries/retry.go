package deliveries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Why a manual retry is refused (Retry, RetryOnce).
var (
	// ErrNotFound: the account has no such delivery.
	ErrNotFound = errors.New("delivery not found")
	// ErrSubscriptionDisabled: the delivery's subscription is disabled.
	ErrSubscriptionDisabled = errors.New("the delivery's subscription is disabled")
	// ErrInFlight: the delivery's job is running or due now.
	ErrInFlight = errors.New("the delivery is already queued or being pushed")
	// ErrAlreadyQueued: the delivery was never attempted and its job
	// waits for a later run.
	ErrAlreadyQueued = errors.New("the delivery is already queued")
	// ErrJobFinishing: an attempt was just recorded and River has not yet
	// finished its job. Retry waits for it before returning this.
	ErrJobFinishing = errors.New("the delivery's job is finishing")
)

// FinishingWindow is how recent a recorded attempt must be for its still
// running job to count as finishing, and FinishingWait how long Retry
// waits for River to finish it.
const (
	FinishingWindow = 3 * time.Second
	FinishingWait   = 2 * time.Second
)

// finishingPoll is how often Retry looks again at a finishing job.
const finishingPoll = 25 * time.Millisecond

// Queue is what a manual retry needs of River (*river.Client[pgx.Tx] is
// one): a new job, or an existing job made available now, in the caller's
// transaction.
type Queue interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobRetryTx(ctx context.Context, tx pgx.Tx, id int64) (*rivertype.JobRow, error)
}

// Retry queues one immediate attempt of the account's delivery (RetryOnce)
// in its own transaction on db. Right after an attempt was recorded, while
// River is still finishing its job, it waits up to FinishingWait for the
// job instead of refusing; past that it returns ErrJobFinishing. now gives
// the time of each try.
func Retry(ctx context.Context, db dbutil.Executor, q Queue, accountID, deliveryID uuid.UUID, now func() time.Time) (dbsqlc.WebhookDelivery, error) {
	deadline := time.Now().Add(FinishingWait)
	for {
		d, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.WebhookDelivery, error) {
			return RetryOnce(ctx, tx, q, accountID, deliveryID, now().UTC())
		})
		if !errors.Is(err, ErrJobFinishing) {
			return d, err
		}
		if time.Now().After(deadline) {
			return d, err
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(finishingPoll):
		}
	}
}

// RetryOnce queues, in tx, one immediate attempt of the account's
// delivery, with its River job:
//
//   - retrying, job waiting for its scheduled retry: the job is made
//     available now; the attempt is the next one of the schedule.
//   - failed or delivered (or a retrying row whose job is gone): a new job
//     with MaxAttempts 1 becomes the delivery's job; max_attempts becomes
//     attempts + 1.
//
// A queued (pending, or job available) or running delivery is refused
// (ErrInFlight, ErrAlreadyQueued, ErrJobFinishing), so one delivery never
// has two attempts in flight; so is one whose subscription is disabled
// (ErrSubscriptionDisabled). It returns the requeued row.
func RetryOnce(ctx context.Context, tx pgx.Tx, q Queue, accountID, deliveryID uuid.UUID, now time.Time) (dbsqlc.WebhookDelivery, error) {
	db := dbsqlc.New()
	d, err := db.DeliveryGetByIDForUpdate(ctx, tx, dbsqlc.DeliveryGetByIDForUpdateParams{ID: deliveryID, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("error reading delivery: %w", err)
	}
	sub, err := db.SubscriptionGetByID(ctx, tx, dbsqlc.SubscriptionGetByIDParams{ID: d.SubscriptionID, AccountID: accountID})
	if err != nil {
		return d, fmt.Errorf("error reading subscription: %w", err)
	}
	if !sub.Enabled {
		return d, ErrSubscriptionDisabled
	}
	var (
		state string
		at    time.Time
	)
	if d.JobID != nil {
		if state, at, err = JobState(ctx, tx, *d.JobID); err != nil {
			return d, err
		}
	}
	switch {
	case state == "running" && d.Status == StatusDelivered:
		// The push was accepted and recorded; River has yet to mark the
		// job completed. Nothing is in flight: a new job below.
	case state == "running" && (d.Status == StatusRetrying || d.Status == StatusFailed) && now.Sub(d.UpdatedAt) < FinishingWindow:
		// The attempt just ended and was recorded; River has yet to mark
		// the job retryable or discarded. Retry waits for it rather than
		// refuse a retry that will be possible in a moment.
		return d, ErrJobFinishing
	case state == "running" || state == "pending" || (state == "available" && !at.After(now)):
		return d, ErrInFlight
	case state == "available" || state == "retryable" || state == "scheduled":
		// Waiting for a later run.
		if d.Status == StatusPending {
			return d, ErrAlreadyQueued
		}
		if d.Status == StatusRetrying {
			if _, err := q.JobRetryTx(ctx, tx, *d.JobID); err != nil {
				return d, fmt.Errorf("error retrying job: %w", err)
			}
			return requeue(ctx, tx, d.ID, *d.JobID, now)
		}
	}
	res, err := q.InsertTx(ctx, tx, events.DeliveryArgs{DeliveryID: d.ID}, extraAttemptOpts(d))
	if err != nil {
		return d, fmt.Errorf("error inserting delivery job: %w", err)
	}
	return requeue(ctx, tx, d.ID, res.Job.ID, now)
}

// extraAttemptOpts are the options of the job that gives a failed or
// delivered delivery one extra attempt (a manual retry, a recovery): a
// single attempt, so that a push that fails again ends failed again;
// requeue raises the delivery's max_attempts to match.
func extraAttemptOpts(d dbsqlc.WebhookDelivery) *river.InsertOpts {
	return &river.InsertOpts{MaxAttempts: 1, Tags: events.DeliveryTags(d.AccountID, d.EventType, d.SubscriptionID)}
}

// requeue makes job the delivery's job, due at now.
func requeue(ctx context.Context, tx pgx.Tx, id uuid.UUID, job int64, now time.Time) (dbsqlc.WebhookDelivery, error) {
	rows, err := dbsqlc.New().DeliveryRequeue(ctx, tx, dbsqlc.DeliveryRequeueParams{Ids: []uuid.UUID{id}, JobIds: []int64{job}, NextRetryAt: now})
	if err != nil {
		return dbsqlc.WebhookDelivery{}, fmt.Errorf("error requeueing delivery: %w", err)
	}
	if len(rows) == 0 {
		return dbsqlc.WebhookDelivery{}, fmt.Errorf("error requeueing delivery: %w", pgx.ErrNoRows)
	}
	return rows[0], nil
}
