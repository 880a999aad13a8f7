package receivers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// Receiver lifetimes, in seconds.
const (
	DefaultTTL = 3600
	MinTTL     = 60
	MaxTTL     = 604800
)

// PurgeGrace is how long an expired receiver and its messages stay
// (answering "gone") before Expire deletes them (then "not found").
const PurgeGrace = 24 * time.Hour

var (
	// ErrNotFound: no receiver of the account has the id.
	ErrNotFound = errors.New("receiver not found")
	// ErrTTL: a lifetime outside MinTTL..MaxTTL.
	ErrTTL = fmt.Errorf("ttl must be %d to %d seconds", MinTTL, MaxTTL)
	// ErrChannel: a channel other than email and sms.
	ErrChannel = errors.New("channel must be email or sms")
	// ErrEmailUnconfigured: email receivers need an inbound domain.
	ErrEmailUnconfigured = errors.New("email receivers are not configured (no inbound domain)")
	// ErrNoFreeNumber: every number of the SMS pool is held by a live
	// receiver.
	ErrNoFreeNumber = errors.New("no SMS number is free")
)

// GoneError is a receiver that has expired: it answers "gone" until Expire
// purges it PurgeGrace later. It matches ErrExpired.
type GoneError struct{ ExpiresAt time.Time }

func (e *GoneError) Error() string {
	return "receiver expired at " + e.ExpiresAt.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrExpired) hold.
func (e *GoneError) Is(target error) bool { return target == ErrExpired }

// Expired says whether r has expired at now.
func Expired(r dbsqlc.Receiver, now time.Time) bool { return !now.Before(r.ExpiresAt) }

// Get returns the account's live receiver id: ErrNotFound when it is
// absent or another account's, a *GoneError when it has expired.
func Get(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID, now time.Time) (dbsqlc.Receiver, error) {
	r, err := dbsqlc.New().ReceiverGetForAccount(ctx, db, dbsqlc.ReceiverGetForAccountParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("reading receiver: %w", err)
	}
	if Expired(r, now) {
		return r, &GoneError{ExpiresAt: r.ExpiresAt}
	}
	return r, nil
}

// NewReceiver is what Create needs beyond the account.
type NewReceiver struct {
	Channel    string // ChannelEmail when empty
	Label      string
	TTLSeconds int // DefaultTTL when zero
	// InboundDomain is the domain of email addresses; without it email
	// receivers are ErrEmailUnconfigured.
	InboundDomain string
	// DefaultPlan is the plan of accounts without one (the receivers limit).
	DefaultPlan string
}

// Create makes a receiver for the account: an email receiver gets a random
// address of the inbound domain, an SMS receiver takes a free number of the
// pool (ErrNoFreeNumber). The plan's receivers limit is checked in the same
// transaction (*billing.LimitError).
func Create(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, n NewReceiver, now time.Time) (dbsqlc.Receiver, error) {
	if n.Channel == "" {
		n.Channel = ChannelEmail
	}
	if n.TTLSeconds == 0 {
		n.TTLSeconds = DefaultTTL
	}
	if n.TTLSeconds < MinTTL || n.TTLSeconds > MaxTTL {
		return dbsqlc.Receiver{}, ErrTTL
	}
	now = now.UTC().Truncate(time.Microsecond)
	params := dbsqlc.ReceiverInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: accountID, Channel: n.Channel, Label: strings.TrimSpace(n.Label),
		TtlSeconds: int32(n.TTLSeconds), ExpiresAt: now.Add(time.Duration(n.TTLSeconds) * time.Second), CreatedAt: now,
	}
	switch n.Channel {
	case ChannelEmail:
		return createEmail(ctx, db, params, n, now)
	case ChannelSMS:
		return createSMS(ctx, db, params, n, now)
	}
	return dbsqlc.Receiver{}, ErrChannel
}

func createEmail(ctx context.Context, db dbutil.Executor, params dbsqlc.ReceiverInsertParams, n NewReceiver, now time.Time) (dbsqlc.Receiver, error) {
	if n.InboundDomain == "" {
		return dbsqlc.Receiver{}, ErrEmailUnconfigured
	}
	for attempt := 0; ; attempt++ {
		params.Address = newEmailLocalPart() + "@" + strings.ToLower(n.InboundDomain)
		row, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Receiver, error) {
			if err := billing.CheckLimit(ctx, tx, params.AccountID, plans.LimitReceivers, n.DefaultPlan, now); err != nil {
				return dbsqlc.Receiver{}, err
			}
			return dbsqlc.New().ReceiverInsert(ctx, tx, params)
		})
		if dbutil.IsUniqueViolation(err, "receivers_email_address_key") && attempt < 3 {
			continue
		}
		if err != nil {
			return row, fmt.Errorf("inserting receiver: %w", err)
		}
		return row, nil
	}
}

func createSMS(ctx context.Context, db dbutil.Executor, params dbsqlc.ReceiverInsertParams, n NewReceiver, now time.Time) (dbsqlc.Receiver, error) {
	q := dbsqlc.New()
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Receiver, error) {
		if err := billing.CheckLimit(ctx, tx, params.AccountID, plans.LimitReceivers, n.DefaultPlan, now); err != nil {
			return dbsqlc.Receiver{}, err
		}
		number, err := q.SMSNumberPickFree(ctx, tx, now)
		if dbutil.IsNotFound(err) {
			return dbsqlc.Receiver{}, ErrNoFreeNumber
		}
		if err != nil {
			return dbsqlc.Receiver{}, fmt.Errorf("picking a free SMS number: %w", err)
		}
		params.Address = number
		row, err := q.ReceiverInsert(ctx, tx, params)
		if err != nil {
			return row, fmt.Errorf("inserting receiver: %w", err)
		}
		err = q.SMSNumberAssign(ctx, tx, dbsqlc.SMSNumberAssignParams{ReceiverID: row.ID, Now: now, PhoneNumber: number})
		if err != nil {
			return row, fmt.Errorf("assigning SMS number: %w", err)
		}
		return row, nil
	})
}

// newEmailLocalPart returns 20 random base32 characters (100 bits).
func newEmailLocalPart() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return string(b)
}

// List returns up to limit of the account's receivers, newest first,
// expired ones included until they are purged, after the receiver before
// when it is set.
func List(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, before *uuid.UUID, limit int) ([]dbsqlc.Receiver, error) {
	rows, err := dbsqlc.New().ReceiverListByAccount(ctx, db, dbsqlc.ReceiverListByAccountParams{
		AccountID: accountID, Before: before, Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing receivers: %w", err)
	}
	return rows, nil
}

// Delete deletes the account's live receiver and its messages (its SMS
// number is free at once): ErrNotFound or *GoneError as Get.
func Delete(ctx context.Context, db dbutil.Executor, accountID, id uuid.UUID, now time.Time) error {
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		if _, err := Get(ctx, tx, accountID, id, now); err != nil {
			return err
		}
		n, err := dbsqlc.New().ReceiverDeleteForAccount(ctx, tx, dbsqlc.ReceiverDeleteForAccountParams{ID: id, AccountID: accountID})
		if err != nil {
			return fmt.Errorf("deleting receiver: %w", err)
		}
		if n == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// ExpireResult counts what one expiry run changed.
type ExpireResult struct {
	Released, Marked, Purged int64
	// PrunedDays counts the daily message counts past DayRetention.
	PrunedDays int64
}

// purgeBatch bounds one DELETE so that purging a backlog never holds long
// locks.
const purgeBatch = 500

// Expire releases the SMS numbers of receivers expired at now, marks them
// expired, prunes the daily counts past DayRetention and purges the
// receivers past PurgeGrace with their messages, in batches
// (it stops between batches once ctx is done).
func Expire(ctx context.Context, db dbsqlc.DBTX, now time.Time) (ExpireResult, error) {
	q := dbsqlc.New()
	var res ExpireResult
	var err error
	if res.Released, err = q.SMSNumberReleaseExpired(ctx, db, now); err != nil {
		return res, fmt.Errorf("releasing SMS numbers: %w", err)
	}
	if res.Marked, err = q.ReceiverMarkExpired(ctx, db, now); err != nil {
		return res, fmt.Errorf("marking expired receivers: %w", err)
	}
	if res.PrunedDays, err = pruneDays(ctx, db, now); err != nil {
		return res, err
	}
	for {
		n, err := q.ReceiverPurgeExpired(ctx, db, dbsqlc.ReceiverPurgeExpiredParams{Cutoff: now.Add(-PurgeGrace), Max: purgeBatch})
		if err != nil {
			return res, fmt.Errorf("purging expired receivers: %w", err)
		}
		res.Purged += n
		if n < purgeBatch || ctx.Err() != nil {
			return res, nil
		}
	}
}
