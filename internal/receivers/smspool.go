package receivers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// e164 is an E.164 number: +, a country code not starting with 0, at most
// 15 digits in all (ITU-T E.164 section 6), and at least 7.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

var (
	// ErrNotE164: a phone number that is not E.164.
	ErrNotE164 = errors.New("must be an E.164 number such as +14155550100")
	// ErrNumberNotFound: the number is not in the pool.
	ErrNumberNotFound = errors.New("SMS number not found")
)

// NumberExistsError: the number is already in the pool.
type NumberExistsError struct{ Number string }

func (e *NumberExistsError) Error() string { return e.Number + " is already in the pool" }

// NumberHeldError: the number is held by a live receiver, so removing it
// would silently cut the receiver off.
type NumberHeldError struct {
	Number     string
	ReceiverID uuid.UUID
	Until      time.Time
}

func (e *NumberHeldError) Error() string {
	return fmt.Sprintf("%s is held by receiver %s until %s; delete that receiver first or wait",
		e.Number, e.ReceiverID, e.Until.UTC().Format(time.RFC3339))
}

// NormalizeE164 strips common separators (spaces, dashes, dots,
// parentheses) and checks E.164 (ErrNotE164).
func NormalizeE164(raw string) (string, error) {
	s := strings.NewReplacer(" ", "", "-", "", ".", "", "(", "", ")", "").Replace(strings.TrimSpace(raw))
	if !e164.MatchString(s) {
		return "", ErrNotE164
	}
	return s, nil
}

// PoolAdmin is the admin changing the pool: the audit event
// sms_pool_changed goes on the admin's own account (the pool belongs to
// none).
type PoolAdmin struct {
	AccountID     uuid.UUID
	KeyIdentifier string
}

// AddNumber adds a number (raw, normalised by NormalizeE164) to the pool
// and audits it: *NumberExistsError for one already there.
func AddNumber(ctx context.Context, db dbutil.Executor, em *events.Emitter, admin PoolAdmin, raw string) (dbsqlc.SmsNumber, error) {
	number, err := NormalizeE164(raw)
	if err != nil {
		return dbsqlc.SmsNumber{}, err
	}
	row, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.SmsNumber, error) {
		row, err := dbsqlc.New().SMSNumberInsert(ctx, tx, number)
		if err != nil {
			return row, err
		}
		return row, auditPool(ctx, tx, em, admin, "added", number)
	})
	if dbutil.IsUniqueViolation(err, "sms_numbers_pkey") {
		return row, &NumberExistsError{Number: number}
	}
	if err != nil {
		return row, fmt.Errorf("adding SMS number: %w", err)
	}
	return row, nil
}

// RemoveNumber removes a number from the pool and audits it:
// ErrNumberNotFound (also for a malformed number), *NumberHeldError while a
// live receiver holds it. A number held by an expired receiver is removed.
func RemoveNumber(ctx context.Context, db dbutil.Executor, em *events.Emitter, admin PoolAdmin, raw string, now time.Time) error {
	number, err := NormalizeE164(raw)
	if err != nil {
		return ErrNumberNotFound
	}
	q := dbsqlc.New()
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		row, err := q.SMSNumberGetForUpdate(ctx, tx, number)
		if dbutil.IsNotFound(err) {
			return ErrNumberNotFound
		}
		if err != nil {
			return fmt.Errorf("reading SMS number: %w", err)
		}
		if row.ReceiverID != nil && row.HolderExpiresAt != nil && now.Before(*row.HolderExpiresAt) {
			return &NumberHeldError{Number: number, ReceiverID: *row.ReceiverID, Until: *row.HolderExpiresAt}
		}
		if _, err = q.SMSNumberDelete(ctx, tx, number); err != nil {
			return fmt.Errorf("deleting SMS number: %w", err)
		}
		return auditPool(ctx, tx, em, admin, "removed", number)
	})
}

// PoolNumber is a number of the pool with its live holder, if any.
type PoolNumber struct {
	PhoneNumber string
	// ReceiverID, AccountID and HeldUntil are set while a live receiver
	// holds the number.
	ReceiverID, AccountID *uuid.UUID
	HeldUntil             *time.Time
	CreatedAt             time.Time
}

// ListNumbers lists the pool at now.
func ListNumbers(ctx context.Context, db dbsqlc.DBTX, now time.Time) ([]PoolNumber, error) {
	rows, err := dbsqlc.New().SMSNumberList(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing SMS numbers: %w", err)
	}
	out := make([]PoolNumber, len(rows))
	for i, n := range rows {
		out[i] = PoolNumber{PhoneNumber: n.PhoneNumber, CreatedAt: n.CreatedAt.UTC()}
		if n.ReceiverID != nil && n.HolderExpiresAt != nil && now.Before(*n.HolderExpiresAt) {
			t := n.HolderExpiresAt.UTC()
			out[i].ReceiverID, out[i].AccountID, out[i].HeldUntil = n.ReceiverID, n.HolderAccountID, &t
		}
	}
	return out, nil
}

func auditPool(ctx context.Context, tx dbutil.Tx, em *events.Emitter, admin PoolAdmin, action, number string) error {
	_, err := em.Emit(ctx, tx, events.Event{AccountID: admin.AccountID, Type: events.TypeSMSPoolChanged,
		Payload: map[string]any{"action": action, "phone_number": number, "admin_key_identifier": admin.KeyIdentifier}})
	if err != nil {
		return fmt.Errorf("auditing the SMS pool: %w", err)
	}
	return nil
}
