package accounts

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/emailaddr"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/signin"
)

// Service carries what the account rules need besides the database,
// which every method takes from its caller (a pool or a transaction).
type Service struct {
	// River inserts the verification mail and the deletion job.
	River *river.Client[pgx.Tx]
	// Emitter writes the audit events.
	Emitter *events.Emitter
	// Passwords bounds argon2id hashing; password.ErrBusy passes through.
	Passwords *password.Limiter
	Logger    *slog.Logger
	Now       func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

var q = dbsqlc.New()

// NormaliseEmail is emailaddr.Normalise with a refusal naming field.
func NormaliseEmail(field, raw string) (string, error) {
	email, err := emailaddr.Normalise(raw)
	if err != nil {
		return "", &FieldError{Field: field, Err: err}
	}
	return email, nil
}

// CheckPassword applies the password rule (password.Validate) to field.
func CheckPassword(field, p string) error {
	if err := password.Validate(p); err != nil {
		return &FieldError{Field: field, Err: err}
	}
	return nil
}

// Created is a new account and its first API key.
type Created struct {
	Account dbsqlc.Account
	Key     dbsqlc.APIKey
	// Plain is the full key, shown once.
	Plain string
}

// Create makes an account with email and password, its first API key
// (labelled "default") and its sign-in address as an unverified
// notification address, in one transaction. Errors: *FieldError,
// ErrEmailTaken, ErrEmailBeingDeleted, password.ErrBusy.
func (s *Service) Create(ctx context.Context, db dbutil.Executor, rawEmail, plain string) (*Created, error) {
	email, err := NormaliseEmail("email", rawEmail)
	if err != nil {
		return nil, err
	}
	if err := CheckPassword("password", plain); err != nil {
		return nil, err
	}
	hash, err := s.Passwords.Hash(ctx, plain)
	if err != nil {
		return nil, fmt.Errorf("hashing password: %w", err)
	}
	key := apikey.Generate()
	out, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (*Created, error) {
		acct, err := q.AccountInsert(ctx, tx, dbsqlc.AccountInsertParams{ID: uuid.Must(uuid.NewV7()), Email: email, PasswordHash: hash})
		if err != nil {
			return nil, fmt.Errorf("inserting account: %w", err)
		}
		row, err := q.APIKeyInsert(ctx, tx, dbsqlc.APIKeyInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: acct.ID, Label: "default", KeyIdentifier: key.Identifier, KeyHash: key.Hash,
		})
		if err != nil {
			return nil, fmt.Errorf("inserting first API key: %w", err)
		}
		// The sign-in address gets notification mail once verified.
		if _, err := notify.ReplaceLogin(ctx, tx, s.River, acct.ID, email, s.now()); err != nil {
			return nil, err
		}
		return &Created{Account: acct, Key: row, Plain: key.Plain}, nil
	})
	if dbutil.IsUniqueViolation(err, "accounts_email_key") {
		return nil, emailTaken(ctx, db, email)
	}
	return out, err
}

// emailTaken says why email is taken: an account being deleted keeps its
// email until its data is gone.
func emailTaken(ctx context.Context, db dbutil.Executor, email string) error {
	if other, err := q.AccountGetByEmail(ctx, db, email); err == nil && other.DeletedAt != nil {
		return ErrEmailBeingDeleted
	}
	return ErrEmailTaken
}

// Change is a change of an account's credentials; nil fields stay.
type Change struct {
	Email, Password *string
	// KeyIdentifier names the key that made the change (audit).
	KeyIdentifier string
}

// Update changes the account's email and/or password in one transaction.
// A new email replaces the old sign-in address among the notification
// addresses (to verify again). A new password refuses every token and
// session issued before it, ends the dashboard sessions, forgets the known
// devices and emits password_changed. Errors: *FieldError, ErrEmailTaken,
// ErrEmailBeingDeleted, ErrNotFound, password.ErrBusy.
func (s *Service) Update(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, ch Change) (dbsqlc.Account, error) {
	params := dbsqlc.AccountUpdateParams{ID: accountID}
	if ch.Email != nil {
		email, err := NormaliseEmail("email", *ch.Email)
		if err != nil {
			return dbsqlc.Account{}, err
		}
		params.Email = &email
	}
	if ch.Password != nil {
		if err := CheckPassword("password", *ch.Password); err != nil {
			return dbsqlc.Account{}, err
		}
		hash, err := s.Passwords.Hash(ctx, *ch.Password)
		if err != nil {
			return dbsqlc.Account{}, fmt.Errorf("hashing password: %w", err)
		}
		params.PasswordHash = &hash
	}
	row, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Account, error) {
		return s.update(ctx, tx, params, ch.KeyIdentifier)
	})
	if dbutil.IsUniqueViolation(err, "accounts_email_key") {
		return row, emailTaken(ctx, db, *params.Email)
	}
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	return row, err
}

func (s *Service) update(ctx context.Context, tx dbutil.Tx, params dbsqlc.AccountUpdateParams, keyIdentifier string) (dbsqlc.Account, error) {
	prev, err := q.AccountGetByID(ctx, tx, params.ID)
	if err != nil {
		return dbsqlc.Account{}, fmt.Errorf("reading account: %w", err)
	}
	row, err := q.AccountUpdate(ctx, tx, params)
	if err != nil {
		return row, fmt.Errorf("updating account: %w", err)
	}
	if row.Email != prev.Email {
		// A new sign-in address replaces the old one among the
		// notification addresses and must be verified again.
		if _, err := notify.ReplaceLogin(ctx, tx, s.River, row.ID, row.Email, s.now()); err != nil {
			return row, err
		}
	}
	if params.PasswordHash == nil {
		return row, nil
	}
	// Tokens and sessions issued before now are refused from now on.
	changed, err := q.AccountSetCredentialsChanged(ctx, tx, dbsqlc.AccountSetCredentialsChangedParams{
		ID: params.ID, ChangedAt: s.now().UTC()})
	if err != nil {
		return row, fmt.Errorf("recording credentials change: %w", err)
	}
	// Every dashboard session ends with the change, the session that
	// made it included (it signs in again with the new password).
	if err := EndSessions(ctx, tx, params.ID); err != nil {
		return row, err
	}
	// Known devices earned their trust with the old password.
	if err := signin.ForgetDevices(ctx, tx, params.ID); err != nil {
		return row, err
	}
	_, err = s.Emitter.Emit(ctx, tx, events.Event{AccountID: params.ID, Type: events.TypePasswordChanged,
		Payload: map[string]any{"key_identifier": keyIdentifier, "changed_at": changed.UTC().Format(time.RFC3339Nano)}})
	if err != nil {
		return row, fmt.Errorf("emitting password_changed: %w", err)
	}
	return row, nil
}

// Deletion is an account marked for deletion.
type Deletion struct {
	At time.Time
	// JobID is the DeleteArgs job removing its data.
	JobID int64
	// KeyHashes are its API keys', for adapters to evict from caches.
	KeyHashes [][]byte
}

// MarkDeleting marks the account deleted (its keys and tokens stop) and
// queues the DeleteArgs job that purges its data, in one transaction.
// ErrNotFound when there is no such live account.
func (s *Service) MarkDeleting(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) (*Deletion, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (*Deletion, error) {
		hashes, err := keyHashes(ctx, tx, accountID)
		if err != nil {
			return nil, err
		}
		at, err := q.AccountMarkDeleting(ctx, tx, accountID)
		if dbutil.IsNotFound(err) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("marking account deleted: %w", err)
		}
		job, err := s.River.InsertTx(ctx, tx, DeleteArgs{AccountID: accountID}, nil)
		if err != nil {
			return nil, fmt.Errorf("queueing account deletion: %w", err)
		}
		return &Deletion{At: at, JobID: job.Job.ID, KeyHashes: hashes}, nil
	})
}

// keyHashes lists the hashes of the account's active keys.
func keyHashes(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) ([][]byte, error) {
	keys, err := q.APIKeyListByAccount(ctx, db, accountID)
	if err != nil {
		return nil, fmt.Errorf("listing API keys: %w", err)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = k.KeyHash
	}
	return out, nil
}
