package notify

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Address is a notification address as the API shows it.
type Address struct {
	ID    uuid.UUID `json:"id"`
	Email string    `json:"email"`
	// Login marks the account's sign-in address (replaced when it changes).
	Login              bool       `json:"login"`
	Verified           bool       `json:"verified"`
	VerifiedAt         *time.Time `json:"verified_at"`
	VerificationSentAt *time.Time `json:"verification_sent_at"`
	CreatedAt          time.Time  `json:"created_at"`
}

// AddressFromRow converts a stored row.
func AddressFromRow(r dbsqlc.NotificationAddress) Address {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return Address{ID: r.ID, Email: r.Email, Login: r.Login, Verified: r.VerifiedAt != nil,
		VerifiedAt: utc(r.VerifiedAt), VerificationSentAt: utc(r.VerificationSentAt), CreatedAt: r.CreatedAt.UTC()}
}

// VerifyEmailKind is the River job kind that mails a verification token.
const VerifyEmailKind = "notify_verify_email"

// VerifyEmailArgs mail a new verification token to one unverified
// address. The token is made when the job runs and stored as its SHA-256,
// so it never sits in the job table.
type VerifyEmailArgs struct {
	AddressID uuid.UUID `json:"address_id"`
	// AccountID tags the job with its account (deleting the account
	// cancels it) and lets the worker skip suspended accounts.
	AccountID uuid.UUID `json:"account_id,omitzero"`
}

// Kind implements river.JobArgs.
func (VerifyEmailArgs) Kind() string { return VerifyEmailKind }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (a VerifyEmailArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 25, Tags: accountTags(a.AccountID)}
}

// accountTags is the River tag of an account's jobs ("account-<id>", as
// internal/accounts.JobTag), so deleting the account cancels them.
func accountTags(id uuid.UUID) []string {
	if id == uuid.Nil {
		return nil
	}
	return []string{"account-" + id.String()}
}

func enqueueVerify(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], account, id uuid.UUID) error {
	if client == nil {
		return errors.New("notify: no River client to queue the verification mail with")
	}
	if _, err := client.InsertTx(ctx, tx, VerifyEmailArgs{AddressID: id, AccountID: account}, nil); err != nil {
		return fmt.Errorf("error enqueueing verification email: %w", err)
	}
	return nil
}

// AddAddress adds an unverified address and queues its verification mail,
// in tx, at now. email must already be normalised (lower-case addr-spec).
// It returns ErrTooManyAddresses past MaxAddresses, ErrAddressExists for an
// address the account has, and a *RecipientBusyError when the address may
// not be mailed yet (nothing is added then).
func AddAddress(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], account uuid.UUID, email string, now time.Time) (Address, error) {
	q := dbsqlc.New()
	// Every new address is mailed a verification: the cap keeps a key from
	// turning the service into a mailer to strangers. Adds of one account
	// take turns on its row, so concurrent ones count what the others added.
	if err := q.NotificationAddressLockAccount(ctx, tx, account); err != nil {
		return Address{}, fmt.Errorf("error locking account for a notification address: %w", err)
	}
	have, err := q.NotificationAddressCount(ctx, tx, account)
	if err != nil {
		return Address{}, fmt.Errorf("error counting notification addresses: %w", err)
	}
	if have >= MaxAddresses {
		return Address{}, ErrTooManyAddresses
	}
	row, err := q.NotificationAddressInsert(ctx, tx, dbsqlc.NotificationAddressInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, Email: email,
	})
	if dbutil.IsUniqueViolation(err, "notification_addresses_account_email_key") {
		return Address{}, ErrAddressExists
	}
	if err != nil {
		return Address{}, fmt.Errorf("error inserting notification address: %w", err)
	}
	if err := claimRecipient(ctx, tx, row.Email, now); err != nil {
		return Address{}, err
	}
	if err := enqueueVerify(ctx, tx, client, row.AccountID, row.ID); err != nil {
		return Address{}, err
	}
	return AddressFromRow(row), nil
}

// ResendVerification queues a new verification mail for an unverified
// address of the account, in tx, at now; a *RecipientBusyError when the
// address may not be mailed yet.
func ResendVerification(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], account, id uuid.UUID, now time.Time) (Address, error) {
	row, err := dbsqlc.New().NotificationAddressGetByID(ctx, tx, id)
	if dbutil.IsNotFound(err) || (err == nil && row.AccountID != account) {
		return Address{}, ErrAddressNotFound
	}
	if err != nil {
		return Address{}, fmt.Errorf("error reading notification address: %w", err)
	}
	if row.VerifiedAt == nil {
		if err := claimRecipient(ctx, tx, row.Email, now); err != nil {
			return Address{}, err
		}
		if err := enqueueVerify(ctx, tx, client, row.AccountID, row.ID); err != nil {
			return Address{}, err
		}
	}
	return AddressFromRow(row), nil
}

// ReplaceLogin makes email the account's login notification address after
// sign-up or an email change: the previous login address is removed and
// the new one must be verified, in tx, at now. Its verification mail is
// queued unless the address's budget (RecipientCooldown,
// RecipientMailsPerDay) forbids it: the sign-up or change goes through
// anyway, and a resend asks again later.
func ReplaceLogin(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], account uuid.UUID, email string, now time.Time) (Address, error) {
	q := dbsqlc.New()
	if _, err := q.NotificationAddressDeleteLogin(ctx, tx, account); err != nil {
		return Address{}, fmt.Errorf("error removing login notification address: %w", err)
	}
	row, err := q.NotificationAddressUpsertLogin(ctx, tx, dbsqlc.NotificationAddressUpsertLoginParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, Email: email,
	})
	if err != nil {
		return Address{}, fmt.Errorf("error storing login notification address: %w", err)
	}
	var busy *RecipientBusyError
	switch err := claimRecipient(ctx, tx, row.Email, now); {
	case errors.As(err, &busy):
		return AddressFromRow(row), nil
	case err != nil:
		return Address{}, err
	}
	if err := enqueueVerify(ctx, tx, client, row.AccountID, row.ID); err != nil {
		return Address{}, err
	}
	return AddressFromRow(row), nil
}

// ListAddresses lists the account's addresses, oldest first.
func ListAddresses(ctx context.Context, db dbutil.Executor, account uuid.UUID) ([]Address, error) {
	rows, err := dbsqlc.New().NotificationAddressList(ctx, db, account)
	if err != nil {
		return nil, fmt.Errorf("error listing notification addresses: %w", err)
	}
	out := make([]Address, len(rows))
	for i, r := range rows {
		out[i] = AddressFromRow(r)
	}
	return out, nil
}

// RemoveAddress deletes one of the account's addresses.
func RemoveAddress(ctx context.Context, db dbutil.Executor, account, id uuid.UUID) error {
	n, err := dbsqlc.New().NotificationAddressDelete(ctx, db, dbsqlc.NotificationAddressDeleteParams{ID: id, AccountID: account})
	if err != nil {
		return fmt.Errorf("error deleting notification address: %w", err)
	}
	if n == 0 {
		return ErrAddressNotFound
	}
	return nil
}

// Verify marks the address whose token this is verified. Tokens are
// single-use and expire after VerificationTokenTTL.
func Verify(ctx context.Context, db dbutil.Executor, token string, now time.Time) (Address, error) {
	if len(token) == 0 || len(token) > 128 {
		return Address{}, ErrBadToken
	}
	row, err := dbsqlc.New().NotificationAddressVerify(ctx, db, dbsqlc.NotificationAddressVerifyParams{
		TokenHash: hashToken(token), Now: now,
	})
	if dbutil.IsNotFound(err) {
		return Address{}, ErrBadToken
	}
	if err != nil {
		return Address{}, fmt.Errorf("error verifying notification address: %w", err)
	}
	return AddressFromRow(row), nil
}

// NewToken stores a fresh verification token for an unverified address and
// returns it (plain, for the mail) with the row. ok is false when the
// address is gone or already verified.
func NewToken(ctx context.Context, db dbutil.Executor, id uuid.UUID, now time.Time) (token string, row dbsqlc.NotificationAddress, ok bool, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", row, false, err
	}
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	row, err = dbsqlc.New().NotificationAddressSetToken(ctx, db, dbsqlc.NotificationAddressSetTokenParams{
		ID: id, TokenHash: hashToken(token), ExpiresAt: now.Add(VerificationTokenTTL), Now: now,
	})
	if dbutil.IsNotFound(err) {
		return "", row, false, nil
	}
	if err != nil {
		return "", row, false, fmt.Errorf("error storing verification token: %w", err)
	}
	return token, row, true, nil
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// MaxAddresses bounds an account's notification addresses (the sign-in
// address included).
const MaxAddresses = 10
