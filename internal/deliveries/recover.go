package deliveries

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// Recovery rules (docs/webhook-delivery.md, "Recovering a time range").
const (
	// RecoverMaxAge is how far back a recovery's range may start.
	RecoverMaxAge = 14 * 24 * time.Hour
	// RecoverBatch is how many deliveries one transaction queues again.
	RecoverBatch = 500
	// RecoverMaxPerRun bounds the deliveries one recovery queues again;
	// past it the run stops and says so in its output (Truncated).
	RecoverMaxPerRun = 10_000
)

// recoverMaxPerRun is RecoverMaxPerRun, lowered by tests.
var recoverMaxPerRun = RecoverMaxPerRun

// Why a recovery is refused.
var (
	// ErrSubscriptionNotFound: the account has no such subscription.
	ErrSubscriptionNotFound = errors.New("event subscription not found")
	// ErrRecoverDisabled: the subscription is disabled; its deliveries
	// would end failed again at once.
	ErrRecoverDisabled = errors.New("the subscription is disabled; enable it (PATCH enabled=true) before recovering its deliveries")
)

// RangeError is a recovery range that is not acceptable: Field names the
// request member at fault.
type RangeError struct {
	Field, Message string
}

func (e *RangeError) Error() string { return e.Field + " " + e.Message }

// RecoverRange checks a requested range against now: since at most
// RecoverMaxAge back and before until; until, when nil or later than now,
// is now. It returns the range at the millisecond precision it is applied
// with (the time in a delivery's UUIDv7 id).
func RecoverRange(since time.Time, until *time.Time, now time.Time) (time.Time, time.Time, error) {
	now = now.UTC().Truncate(time.Millisecond)
	since = since.UTC().Truncate(time.Millisecond)
	end := now
	if until != nil && until.Before(now) {
		end = until.UTC().Truncate(time.Millisecond)
	}
	switch {
	case since.Before(now.Add(-RecoverMaxAge)):
		return since, end, &RangeError{Field: "since", Message: "must be at most 14 days ago"}
	case !since.Before(end):
		if until != nil {
			return since, end, &RangeError{Field: "until", Message: "must be later than since"}
		}
		return since, end, &RangeError{Field: "since", Message: "must be in the past"}
	}
	return since, end, nil
}

// RecoverArgs queues again the failed deliveries of one subscription
// created in [Since, Until): Recover does the work, in batches. Requests
// of the same range are one job while it is queued or running.
type RecoverArgs struct {
	AccountID      uuid.UUID `json:"account_id"`
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
}

// Kind implements river.JobArgs.
func (RecoverArgs) Kind() string { return "webhook_recover" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RecoverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, MaxAttempts: 5,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: queues.ActiveStates}}
}

// Inserter inserts a job in the caller's transaction (*river.Client[pgx.Tx]
// is one).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Recovery is a queued recovery.
type Recovery struct {
	JobID        int64
	Since, Until time.Time
	// AlreadyQueued: the same range was queued and not yet done; JobID is
	// that job.
	AlreadyQueued bool
}

// RecoveryRequestedPayload is the payload of subscription_recovery_requested.
type RecoveryRequestedPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
	JobID          int64     `json:"job_id"`
	AlreadyQueued  bool      `json:"already_queued"`
	KeyIdentifier  string    `json:"key_identifier"`
}

// RequestRecovery queues, in one transaction on db, the recovery of the
// account's subscription over [since, until) (checked by RecoverRange) and
// emits subscription_recovery_requested with it.
func RequestRecovery(ctx context.Context, db dbutil.Executor, em *events.Emitter, q Inserter, accountID, subID uuid.UUID,
	since time.Time, until *time.Time, keyIdentifier string, now time.Time,
) (Recovery, error) {
	from, to, err := RecoverRange(since, until, now)
	if err != nil {
		return Recovery{}, err
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (Recovery, error) {
		sub, err := dbsqlc.New().SubscriptionGetByID(ctx, tx, dbsqlc.SubscriptionGetByIDParams{ID: subID, AccountID: accountID})
		if dbutil.IsNotFound(err) {
			return Recovery{}, ErrSubscriptionNotFound
		}
		if err != nil {
			return Recovery{}, fmt.Errorf("error reading subscription: %w", err)
		}
		if !sub.Enabled {
			return Recovery{}, ErrRecoverDisabled
		}
		// Tagged as the subscription's delivery jobs are (events.DeliveryTags),
		// so that River UI's tag filter shows them together.
		res, err := q.InsertTx(ctx, tx, RecoverArgs{AccountID: accountID, SubscriptionID: subID, Since: from, Until: to},
			&river.InsertOpts{Tags: []string{"account-" + accountID.String(), "subscription-" + subID.String()}})
		if err != nil {
			return Recovery{}, fmt.Errorf("error queueing recovery: %w", err)
		}
		out := Recovery{JobID: res.Job.ID, Since: from, Until: to, AlreadyQueued: res.UniqueSkippedAsDuplicate}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: accountID, Type: events.TypeSubscriptionRecoveryRequested, At: now,
			Payload: RecoveryRequestedPayload{SubscriptionID: subID, Since: from, Until: to, JobID: out.JobID,
				AlreadyQueued: out.AlreadyQueued, KeyIdentifier: keyIdentifier},
		}); err != nil {
			return Recovery{}, fmt.Errorf("error emitting subscription_recovery_requested: %w", err)
		}
		return out, nil
	})
}

// ManyInserter inserts jobs in the caller's transaction
// (*river.Client[pgx.Tx] is one).
type ManyInserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// TagRecovery marks the delivery jobs a recovery queued. Each of their
// deliveries already reported its failure (webhook_delivery_failed) when
// it first ended failed, so failing again reports nothing more: recovering
// a range while the endpoint is still down must not raise one event per
// delivery (up to RecoverMaxPerRun).
const TagRecovery = "recovery"

// Recovered reports whether a delivery job was queued by a recovery.
func Recovered(tags []string) bool { return slices.Contains(tags, TagRecovery) }

// RecoverOutput is a recovery run's River output.
type RecoverOutput struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
	// Requeued counts the deliveries this run queued again.
	Requeued int `json:"requeued"`
	Batches  int `json:"batches"`
	// Truncated: more failed deliveries are in the range than one run
	// queues (RecoverMaxPerRun); request the recovery again for the rest.
	Truncated bool `json:"truncated"`
	// Stopped says why the run stopped early (subscription deleted or
	// disabled); empty when it went through the range.
	Stopped string `json:"stopped,omitempty"`
}

// Recover queues again the failed deliveries of a.SubscriptionID created
// in [a.Since, a.Until), oldest first, RecoverBatch per transaction, each
// with a new job of one attempt as a manual retry of a failed delivery
// does (RetryOnce). A delivery queued again is no longer failed, so a
// rerun, or a concurrent run over the same deliveries, does not queue it
// twice; rows another transaction holds are skipped. It stops at
// RecoverMaxPerRun, or when the subscription is deleted or disabled.
func Recover(ctx context.Context, db dbutil.Executor, q ManyInserter, a RecoverArgs, now func() time.Time) (RecoverOutput, error) {
	out := RecoverOutput{SubscriptionID: a.SubscriptionID, Since: a.Since, Until: a.Until}
	p := dbsqlc.DeliveryRecoverBatchParams{
		SubscriptionID: a.SubscriptionID, AccountID: a.AccountID, FromID: uuidv7Floor(a.Since), ToID: uuidv7Floor(a.Until),
	}
	for out.Requeued < recoverMaxPerRun {
		p.Max = int32(min(RecoverBatch, recoverMaxPerRun-out.Requeued))
		var n int
		err := dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			n, out.Stopped, err = recoverBatch(ctx, tx, q, &p, now().UTC())
			return err
		})
		if err != nil {
			return out, err
		}
		if n == 0 || out.Stopped != "" {
			return out, nil
		}
		out.Requeued += n
		out.Batches++
	}
	p.Max = 1
	more, err := dbsqlc.New().DeliveryRecoverBatch(ctx, db, p)
	if err != nil {
		return out, fmt.Errorf("error looking for more failed deliveries: %w", err)
	}
	out.Truncated = len(more) > 0
	return out, nil
}

// recoverBatch queues again, in tx, the next batch after p.After and
// moves p.After past it. It returns how many it queued, or why the
// recovery stops.
func recoverBatch(ctx context.Context, tx pgx.Tx, q ManyInserter, p *dbsqlc.DeliveryRecoverBatchParams, now time.Time) (int, string, error) {
	db := dbsqlc.New()
	sub, err := db.SubscriptionGetByID(ctx, tx, dbsqlc.SubscriptionGetByIDParams{ID: p.SubscriptionID, AccountID: p.AccountID})
	if dbutil.IsNotFound(err) {
		return 0, "the subscription was deleted", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("error reading subscription: %w", err)
	}
	if !sub.Enabled {
		return 0, "the subscription was disabled", nil
	}
	rows, err := db.DeliveryRecoverBatch(ctx, tx, *p)
	if err != nil || len(rows) == 0 {
		return 0, "", err
	}
	params := make([]river.InsertManyParams, len(rows))
	for i, d := range rows {
		opts := extraAttemptOpts(d)
		opts.Tags = append(opts.Tags, TagRecovery)
		params[i] = river.InsertManyParams{Args: events.DeliveryArgs{DeliveryID: d.ID}, InsertOpts: opts}
	}
	res, err := q.InsertManyTx(ctx, tx, params)
	if err != nil {
		return 0, "", fmt.Errorf("error inserting delivery jobs: %w", err)
	}
	rq := dbsqlc.DeliveryRequeueParams{Ids: make([]uuid.UUID, len(rows)), JobIds: make([]int64, len(rows)), NextRetryAt: now}
	for i, d := range rows {
		rq.Ids[i], rq.JobIds[i] = d.ID, res[i].Job.ID
	}
	if _, err := db.DeliveryRequeue(ctx, tx, rq); err != nil {
		return 0, "", fmt.Errorf("error requeueing deliveries: %w", err)
	}
	p.After = rows[len(rows)-1].ID
	return len(rows), "", nil
}

// uuidv7Floor is the least UUID of t's millisecond in UUIDv7 order: the
// bound of a range of ids by creation time (as mailwatch_uuidv7_floor).
func uuidv7Floor(t time.Time) uuid.UUID {
	var u uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
	return u
}
