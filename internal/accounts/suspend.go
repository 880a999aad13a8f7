package accounts

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Admin names the admin making a change, for its audit event.
type Admin struct {
	AccountID     uuid.UUID
	KeyIdentifier string
}

// Changed is an account after an admin's change.
type Changed struct {
	Account dbsqlc.Account
	// KeyHashes are its active keys', for adapters to evict from caches.
	KeyHashes [][]byte
}

// Suspend suspends the account with reason (trimmed): its keys and tokens
// are refused and its webhook pushes wait until Unsuspend. Emits
// account_suspended with the admin's fields. Errors: *FieldError (blank
// reason), ErrSuspendSelf, ErrNotFound, ErrDeleting, ErrAlreadySuspended,
// ErrSuspendedOrDeleting.
func (s *Service) Suspend(ctx context.Context, db dbutil.Executor, admin Admin, accountID uuid.UUID, reason string) (*Changed, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, &FieldError{Field: "reason", Err: ErrBlank}
	}
	if accountID == admin.AccountID {
		return nil, ErrSuspendSelf
	}
	return s.changeState(ctx, db, admin, accountID, events.TypeAccountSuspended,
		func(ctx context.Context, tx dbutil.Tx, acct dbsqlc.Account, audit map[string]any) (dbsqlc.Account, error) {
			if acct.SuspendedAt != nil {
				return acct, ErrAlreadySuspended
			}
			row, err := q.AccountSuspend(ctx, tx, dbsqlc.AccountSuspendParams{ID: accountID, Reason: reason})
			if dbutil.IsNotFound(err) {
				return row, ErrSuspendedOrDeleting
			}
			if err != nil {
				return row, fmt.Errorf("suspending account: %w", err)
			}
			audit["reason"] = reason
			return row, nil
		})
}

// Unsuspend lifts the account's suspension and makes its waiting webhook
// pushes due now. Emits account_unsuspended with the admin's fields and the
// previous reason. Errors: ErrNotFound, ErrDeleting, ErrNotSuspended.
func (s *Service) Unsuspend(ctx context.Context, db dbutil.Executor, admin Admin, accountID uuid.UUID) (*Changed, error) {
	return s.changeState(ctx, db, admin, accountID, events.TypeAccountUnsuspended,
		func(ctx context.Context, tx dbutil.Tx, acct dbsqlc.Account, audit map[string]any) (dbsqlc.Account, error) {
			if acct.SuspendedAt == nil {
				return acct, ErrNotSuspended
			}
			row, err := q.AccountUnsuspend(ctx, tx, accountID)
			if dbutil.IsNotFound(err) {
				return row, ErrNotSuspended
			}
			if err != nil {
				return row, fmt.Errorf("lifting suspension: %w", err)
			}
			audit["previous_reason"] = acct.SuspendedReason
			// Pushes that waited out the suspension go now.
			_, err = WakeDeliveries(ctx, tx, accountID)
			return row, err
		})
}

// changeState runs an admin's change of an account in one transaction with
// its audit event (auditType, on the affected account, with the admin's
// fields and what change adds).
func (s *Service) changeState(ctx context.Context, db dbutil.Executor, admin Admin, id uuid.UUID, auditType string,
	change func(ctx context.Context, tx dbutil.Tx, acct dbsqlc.Account, audit map[string]any) (dbsqlc.Account, error),
) (*Changed, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (*Changed, error) {
		acct, err := q.AccountGetByID(ctx, tx, id)
		if dbutil.IsNotFound(err) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("reading account: %w", err)
		}
		if acct.DeletedAt != nil {
			return nil, ErrDeleting
		}
		self, err := q.AccountGetByID(ctx, tx, admin.AccountID)
		if err != nil {
			return nil, fmt.Errorf("reading admin account: %w", err)
		}
		audit := map[string]any{
			"admin_account_id": admin.AccountID, "admin_email": self.Email, "admin_key_identifier": admin.KeyIdentifier,
		}
		row, err := change(ctx, tx, acct, audit)
		if err != nil {
			return nil, err
		}
		if _, err := s.Emitter.Emit(ctx, tx, events.Event{AccountID: id, Type: auditType, Payload: audit}); err != nil {
			return nil, fmt.Errorf("emitting %s: %w", auditType, err)
		}
		hashes, err := keyHashes(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		return &Changed{Account: row, KeyHashes: hashes}, nil
	})
}

// WakeDeliveries makes the delivery jobs of an unsuspended account,
// snoozed while it was suspended, available now (as River's scheduler
// would once their time came). The delivery rows' next_retry_at cannot
// tell a snooze from a retry's backoff (the reconciler copies a snoozed
// job's time into it), so a retrying delivery whose backoff had not ended
// is tried a little early: the account waited longer than that already.
func WakeDeliveries(ctx context.Context, tx pgx.Tx, accountID uuid.UUID) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE river_job j
SET state = 'available', scheduled_at = now()
FROM webhook_deliveries d
WHERE d.account_id = $1 AND d.status IN ('pending', 'retrying')
  AND j.id = d.job_id AND j.state = 'scheduled'`, accountID)
	if err != nil {
		return 0, fmt.Errorf("error waking deliveries: %w", err)
	}
	return tag.RowsAffected(), nil
}
