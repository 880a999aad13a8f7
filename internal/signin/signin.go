// Package signin limits password guessing per account. Every route that
// checks a password (the dashboard's sign-in form and the password grant of
// POST /api/auth/token) goes through Begin before comparing it, so they
// share one failure budget per account whatever client IP a guess comes from.
//
// The rule is OWASP's "device cookie" scheme with growing delays instead of
// a fixed lockout:
//
//   - An account has a budget for the clients it does not know, and one per
//     known device: a client that gave the account's right password within
//     DeviceTTL and keeps the random token it was then given (the dashboard's
//     mw_device cookie). A guess is charged to the known device's budget when
//     the client presents one, else to the unknown clients' budget. Guessing
//     from anywhere else therefore never holds the owner's own browser out.
//   - A budget allows FreeFailures consecutive failures; from then on each
//     failure closes it for a delay that doubles with every further failure
//     (FirstDelay, 2x, 4x, ... up to MaxDelay). While closed, checks are
//     refused (LimitedError) without comparing the password, so a right
//     password is refused too and the refusal tells nothing.
//   - A right password clears the budget it was charged to; failures are
//     forgotten ForgetAfter after the last one.
//   - An attempt is charged as a failure before the password is compared,
//     under the row's lock, so concurrent guesses cannot overrun the budget.
//
// State lives in Postgres (table signin_limits), shared by every replica and
// kept across restarts: one row per account for unknown clients and at most
// MaxDevices rows per account for known devices.
package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

const (
	// FreeFailures is how many consecutive failures a budget allows before
	// delays begin.
	FreeFailures = 10
	// FirstDelay is the wait after the FreeFailures-th failure; each
	// further failure doubles it.
	FirstDelay = time.Minute
	// MaxDelay caps the wait: an attacker who keeps guessing gets about
	// one guess an hour per account.
	MaxDelay = time.Hour
	// ForgetAfter is how long after its last failure a budget starts full
	// again.
	ForgetAfter = 24 * time.Hour
	// DeviceTTL is how long a device stays known after its last right
	// password; the cookie that names it lives as long.
	DeviceTTL = 30 * 24 * time.Hour
	// MaxDevices bounds the known devices of one account; adding one
	// beyond it forgets the least recently used.
	MaxDevices = 20
	// TokenLength is the length of a device token (32 random bytes,
	// unpadded base64url).
	TokenLength = 43
)

// LimitedError refuses a check while its budget is closed.
type LimitedError struct {
	// RetryAfter is how long until a check is made again.
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	return "too many failed sign-ins for this account; retry in " + strconv.FormatInt(e.Seconds(), 10) + " seconds"
}

// Seconds is RetryAfter in whole seconds, rounded up, at least 1.
func (e *LimitedError) Seconds() int64 {
	return max(int64((e.RetryAfter+time.Second-1)/time.Second), 1)
}

// ErrNoAccount means the account is gone (deleted since it was looked up).
var ErrNoAccount = errors.New("signin: no such account")

// Budget is the failure state of one budget (a row of signin_limits).
type Budget struct {
	Failures      int
	LastFailureAt *time.Time
	BlockedUntil  *time.Time
}

// Delay is how long a budget stays closed after its n-th consecutive
// failure: nothing below FreeFailures, then FirstDelay doubling up to
// MaxDelay.
func Delay(n int) time.Duration {
	if n < FreeFailures {
		return 0
	}
	d := FirstDelay
	for i := FreeFailures; i < n && d < MaxDelay; i++ {
		d *= 2
	}
	return min(d, MaxDelay)
}

// Charge counts one attempt at now as a failure in advance, or refuses it
// with a *LimitedError while the budget is closed.
func (b Budget) Charge(now time.Time) (Budget, error) {
	if b.BlockedUntil != nil && now.Before(*b.BlockedUntil) {
		return b, &LimitedError{RetryAfter: b.BlockedUntil.Sub(now)}
	}
	if b.LastFailureAt != nil && now.Sub(*b.LastFailureAt) >= ForgetAfter {
		b.Failures = 0
	}
	b.Failures++
	at := now
	b.LastFailureAt = &at
	b.BlockedUntil = nil
	if d := Delay(b.Failures); d > 0 {
		until := now.Add(d)
		b.BlockedUntil = &until
	}
	return b, nil
}

// Refund takes back one charge whose password was never compared.
func (b Budget) Refund() Budget {
	b.Failures = max(b.Failures-1, 0)
	if b.Failures < FreeFailures {
		b.BlockedUntil = nil
	}
	return b
}

// Attempt is one password check, charged to its budget by Begin. A wrong
// password needs no further call: it was counted in advance.
type Attempt struct {
	account uuid.UUID
	// device is the known device's token hash the attempt was charged
	// to; nil for the unknown clients' budget.
	device []byte
	token  string
}

// Known reports whether the attempt came from a device the account knows.
func (a *Attempt) Known() bool { return a.device != nil }

// DeviceHash is the stored form of a device token.
func DeviceHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// WellFormed reports whether token has the shape NewToken makes, so that
// no other value reaches the database.
func WellFormed(token string) bool {
	if len(token) != TokenLength {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil
}

// NewToken returns a new random device token.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func budgetOf(r dbsqlc.SigninLimit) Budget {
	return Budget{Failures: int(r.Failures), LastFailureAt: r.LastFailureAt, BlockedUntil: r.BlockedUntil}
}

func save(ctx context.Context, tx dbutil.Tx, account uuid.UUID, device []byte, b Budget) error {
	if device == nil {
		device = []byte{}
	}
	err := dbsqlc.New().SigninLimitSave(ctx, tx, dbsqlc.SigninLimitSaveParams{
		Failures: int32(b.Failures), LastFailureAt: b.LastFailureAt, BlockedUntil: b.BlockedUntil,
		AccountID: account, DeviceHash: device,
	})
	if err != nil {
		return fmt.Errorf("error saving sign-in budget: %w", err)
	}
	return nil
}

// Begin charges a password check of account at now, before the password
// is compared: to the known device named by deviceToken (a client's
// mw_device cookie, "" for none) while that device's budget is open, else
// to the account's budget for unknown clients. It returns a *LimitedError
// when that budget is closed and ErrNoAccount when the account is gone.
// It runs in its own transaction on db (a savepoint when db is one).
func Begin(ctx context.Context, db dbutil.Executor, account uuid.UUID, deviceToken string, now time.Time) (*Attempt, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (*Attempt, error) {
		q := dbsqlc.New()
		if WellFormed(deviceToken) {
			hash := DeviceHash(deviceToken)
			row, err := q.SigninLimitLockDevice(ctx, tx, dbsqlc.SigninLimitLockDeviceParams{
				AccountID: account, DeviceHash: hash, KnownSince: now.Add(-DeviceTTL)})
			switch {
			case err == nil:
				// A device whose own budget is closed is one more
				// unknown client.
				if b, err := budgetOf(row).Charge(now); err == nil {
					if err := save(ctx, tx, account, hash, b); err != nil {
						return nil, err
					}
					return &Attempt{account: account, device: hash, token: deviceToken}, nil
				}
			case !dbutil.IsNotFound(err):
				return nil, fmt.Errorf("error reading known device: %w", err)
			}
		}
		row, err := q.SigninLimitLockClients(ctx, tx, account)
		if dbutil.IsNotFound(err) {
			return nil, ErrNoAccount
		}
		if err != nil {
			return nil, fmt.Errorf("error reading sign-in budget: %w", err)
		}
		b, err := budgetOf(row).Charge(now)
		if err != nil {
			return nil, err
		}
		if err := save(ctx, tx, account, nil, b); err != nil {
			return nil, err
		}
		return &Attempt{account: account}, nil
	})
}

// Succeeded records a right password: the budget the attempt was charged
// to starts full again. With remember, the client becomes (or stays) a
// known device of the account and the returned token is the one it should
// keep (its own when it was known, else a new one); without, the token is
// the known device's or "".
func (a *Attempt) Succeeded(ctx context.Context, db dbutil.Executor, now time.Time, remember bool) (string, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (string, error) {
		q := dbsqlc.New()
		if !a.Known() {
			if err := save(ctx, tx, a.account, nil, Budget{}); err != nil {
				return "", err
			}
			if !remember {
				return "", nil
			}
			a.token = NewToken()
			a.device = DeviceHash(a.token)
		}
		if err := q.SigninLimitRemember(ctx, tx, dbsqlc.SigninLimitRememberParams{
			AccountID: a.account, DeviceHash: a.device, At: now}); err != nil {
			return "", fmt.Errorf("error remembering device: %w", err)
		}
		if _, err := q.SigninLimitPruneDevices(ctx, tx, dbsqlc.SigninLimitPruneDevicesParams{
			AccountID: a.account, KnownSince: now.Add(-DeviceTTL), Keep: MaxDevices}); err != nil {
			return "", fmt.Errorf("error pruning known devices: %w", err)
		}
		return a.token, nil
	})
}

// Abandon takes back the charge of an attempt whose password was never
// compared (the hashing queue was full, the database failed).
func (a *Attempt) Abandon(ctx context.Context, db dbutil.Executor) error {
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		q := dbsqlc.New()
		var (
			row dbsqlc.SigninLimit
			err error
		)
		if a.Known() {
			row, err = q.SigninLimitLockDevice(ctx, tx, dbsqlc.SigninLimitLockDeviceParams{
				AccountID: a.account, DeviceHash: a.device, KnownSince: time.Time{}})
		} else {
			row, err = q.SigninLimitLockClients(ctx, tx, a.account)
		}
		if dbutil.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error reading sign-in budget: %w", err)
		}
		return save(ctx, tx, a.account, a.device, budgetOf(row).Refund())
	})
}

// ForgetDevices forgets every device the account knows, in the caller's
// transaction (a password change: trust was earned with the old password).
func ForgetDevices(ctx context.Context, tx dbutil.Tx, account uuid.UUID) error {
	if _, err := dbsqlc.New().SigninLimitForgetDevices(ctx, tx, account); err != nil {
		return fmt.Errorf("error forgetting known devices: %w", err)
	}
	return nil
}
