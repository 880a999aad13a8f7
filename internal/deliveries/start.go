package deliveries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Started is an attempt recorded before its push: what the push needs.
type Started struct {
	Delivery  dbsqlc.WebhookDelivery
	Sub       dbsqlc.EventSubscription
	AttemptID uuid.UUID
}

// StartParams names the run starting an attempt.
type StartParams struct {
	DeliveryID uuid.UUID
	JobID      int64
	// Attempt and MaxAttempts are the job's.
	Attempt, MaxAttempts int
	// OperatorRetry: the run follows a completed attempt (OperatorRetry).
	OperatorRetry bool
	Now           time.Time
}

func (p StartParams) attemptsLeft() int32 { return int32(max(p.MaxAttempts-p.Attempt, 0)) }

// Start locks the delivery in tx, decides whether the run p owns it, and
// records the attempt before the request is made. It returns either the
// started attempt or why nothing is pushed (the run's River output); a
// delivery whose subscription is disabled is marked failed on the way.
func Start(ctx context.Context, tx pgx.Tx, p StartParams) (*Started, *SkipOutput, error) {
	q := dbsqlc.New()
	row, err := q.DeliveryGetForWork(ctx, tx, p.DeliveryID)
	if dbutil.IsNotFound(err) {
		return nil, &SkipOutput{Reason: SkipDeliveryGone, Detail: "the delivery no longer exists (its subscription or account was deleted)"}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("error reading delivery: %w", err)
	}
	d, sub := row.WebhookDelivery, row.EventSubscription
	if skip, err := skipReason(ctx, tx, p, d); skip != nil || err != nil {
		return nil, skip, err
	}
	if !sub.Enabled {
		return nil, disabledSkip(sub), failDisabled(ctx, tx, d, sub)
	}
	if _, err := q.DeliveryAttemptCloseInterrupted(ctx, tx, d.ID); err != nil {
		return nil, nil, fmt.Errorf("error closing interrupted attempts: %w", err)
	}
	d, err = q.DeliveryStartAttempt(ctx, tx, dbsqlc.DeliveryStartAttemptParams{
		ID: d.ID, JobID: p.JobID, JobAttemptsLeft: p.attemptsLeft(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("error starting attempt: %w", err)
	}
	att, err := q.DeliveryAttemptInsert(ctx, tx, dbsqlc.DeliveryAttemptInsertParams{
		ID: uuid.Must(uuid.NewV7()), DeliveryID: d.ID, JobID: p.JobID, JobAttempt: int32(p.Attempt), StartedAt: p.Now,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("error recording attempt: %w", err)
	}
	return &Started{Delivery: d, Sub: sub, AttemptID: att.ID}, nil, nil
}

// skipReason says why run p must not push d (nil: it may).
func skipReason(ctx context.Context, tx pgx.Tx, p StartParams, d dbsqlc.WebhookDelivery) (*SkipOutput, error) {
	if d.JobID == nil || *d.JobID != p.JobID {
		// Another job owns the delivery (a manual retry made a new one).
		// This run only takes over when that job is finished or gone,
		// e.g. an operator retrying an older job in River UI.
		state, err := jobStateOf(ctx, tx, d.JobID)
		if err != nil {
			return nil, err
		}
		if JobStateActive(state) {
			return &SkipOutput{Reason: SkipOwnedByOtherJob, OwnerJobID: d.JobID, Detail: fmt.Sprintf(
				"job %d (%s) owns this delivery and will push it; retry that job (or the delivery through the API) instead", *d.JobID, state)}, nil
		}
	}
	if d.Status == StatusDelivered && !p.OperatorRetry {
		// This run follows an attempt of this job that never finished in
		// River (the worker died after the push was recorded and before
		// River completed the job, and the rescuer queued it again):
		// delivery is at least once, but a rescue never pushes again.
		return &SkipOutput{Reason: SkipAlreadyDelivered, Detail: "the delivery was already delivered; a run after a " +
			"crash or a rescue never pushes again (retry a completed job, or the delivery through the API, to re-send)"}, nil
	}
	acct, err := accounts.Get(ctx, tx, d.AccountID)
	if err == nil && acct.Suspended() {
		// Pushes of a suspended account wait, without using an attempt,
		// until an admin unsuspends it (which wakes them).
		return &SkipOutput{Reason: SkipAccountSuspended, Snooze: SuspendedSnooze, Detail: "the account is suspended; " +
			"the push waits until an admin unsuspends it"}, nil
	}
	if err != nil && !errors.Is(err, accounts.ErrNotFound) {
		return nil, err
	}
	return nil, nil
}

// disabledSkip is the output of a run whose subscription is disabled.
func disabledSkip(sub dbsqlc.EventSubscription) *SkipOutput {
	skip := &SkipOutput{Reason: SkipSubscriptionDisabled, Cancelled: true, Detail: "the subscription is disabled; " +
		"enable it (PATCH .../event-subscriptions/{id} {\"enabled\": true}) and retry"}
	if sub.DisabledReason != nil {
		skip.Detail = "the subscription is disabled (" + *sub.DisabledReason + "); enable it " +
			"(PATCH .../event-subscriptions/{id} {\"enabled\": true}) and retry"
	}
	return skip
}

// failDisabled marks failed a delivery whose subscription is disabled,
// unless it was delivered (an operator's re-send of a delivered delivery
// stays delivered).
func failDisabled(ctx context.Context, tx pgx.Tx, d dbsqlc.WebhookDelivery, sub dbsqlc.EventSubscription) error {
	if d.Status == StatusDelivered {
		return nil
	}
	failed, err := dbsqlc.New().DeliveryMarkFailed(ctx, tx, dbsqlc.DeliveryMarkFailedParams{
		ID: d.ID, LastError: "the subscription is disabled", LastErrorClass: ErrorClassSubscriptionDisabled,
	})
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error failing delivery: %w", err)
	}
	// The operator's retry ended failed: like every delivery that ends
	// failed, it emits webhook_delivery_failed.
	return EmitFailed(ctx, tx, &events.Emitter{}, failed, sub)
}

// StartIn is one run asking to start an attempt on the fast path
// (StartOwned).
type StartIn struct {
	DeliveryID   uuid.UUID
	JobID        int64
	AttemptID    uuid.UUID
	JobAttempt   int32
	AttemptsLeft int32
	StartedAt    time.Time
}

// StartOwned starts, in one statement, the attempts of the runs that own
// a pending or retrying delivery of an enabled subscription: the common
// case. out[i] is nil for a run that must take Start's path instead.
func StartOwned(ctx context.Context, db dbutil.Executor, ins []StartIn) ([]*Started, error) {
	p := dbsqlc.DeliveryStartOwnedManyParams{
		Ids: make([]uuid.UUID, len(ins)), JobIds: make([]int64, len(ins)), AttemptIds: make([]uuid.UUID, len(ins)),
		JobAttempts: make([]int32, len(ins)), JobAttemptsLeft: make([]int32, len(ins)), StartedAt: make([]time.Time, len(ins)),
	}
	// A run is known by its delivery and its job: two jobs of one delivery
	// (an operator re-running an old one) may start in one batch, and only
	// the owner's run is started.
	type run struct {
		delivery uuid.UUID
		job      int64
	}
	index := make(map[run]int, len(ins))
	for i, in := range ins {
		p.Ids[i], p.JobIds[i], p.AttemptIds[i] = in.DeliveryID, in.JobID, in.AttemptID
		p.JobAttempts[i], p.JobAttemptsLeft[i], p.StartedAt[i] = in.JobAttempt, in.AttemptsLeft, in.StartedAt
		index[run{in.DeliveryID, in.JobID}] = i
	}
	rows, err := dbsqlc.New().DeliveryStartOwnedMany(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("error starting attempts: %w", err)
	}
	out := make([]*Started, len(ins))
	for _, r := range rows {
		i, ok := index[run{r.ID, r.JobID}]
		if !ok {
			continue
		}
		out[i] = &Started{
			Delivery: dbsqlc.WebhookDelivery{
				ID: r.ID, AccountID: r.AccountID, SubscriptionID: r.SubscriptionID, EventID: r.EventID,
				EventType: r.EventType, Body: r.Body, Status: r.Status, Attempts: r.Attempts,
			},
			Sub: dbsqlc.EventSubscription{
				ID: r.SubscriptionID, AccountID: r.AccountID, URL: r.URL, Enabled: true,
				SecretCiphertext: r.SecretCiphertext, SecretKeyID: r.SecretKeyID,
				PreviousSecretCiphertext: r.PreviousSecretCiphertext, PreviousSecretKeyID: r.PreviousSecretKeyID,
				PreviousSecretExpiresAt: r.PreviousSecretExpiresAt, MaxPerSecond: r.MaxPerSecond, MaxInFlight: r.MaxInFlight,
			},
			AttemptID: ins[i].AttemptID,
		}
	}
	return out, nil
}

// RetractAttempt withdraws an attempt started but never pushed (the push
// waits for its turn), so that waiting leaves no attempt; the delivery's
// next_retry_at becomes nextRetryAt.
func RetractAttempt(ctx context.Context, db dbutil.Executor, st *Started, nextRetryAt time.Time) error {
	if _, err := dbsqlc.New().DeliveryRetractAttempt(ctx, db, dbsqlc.DeliveryRetractAttemptParams{
		ID: st.Delivery.ID, AttemptID: st.AttemptID, NextRetryAt: nextRetryAt,
	}); err != nil {
		return fmt.Errorf("error retracting an attempt over a concurrency bound: %w", err)
	}
	return nil
}
