package accounts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/emailaddr"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/signin"
)

// dummyHash is verified when no account has the email, so that a wrong
// email costs the same time as a wrong password.
var dummyHash = sync.OnceValue(func() string {
	h, _ := password.Hash(context.Background(), "mailwatch-dummy-password")
	return h
})

// SignedIn is the outcome of a right password.
type SignedIn struct {
	Account uuid.UUID
	Email   string
	// Device is the token the client keeps as a known device of the
	// account (its mw_device cookie); "" unless asked for.
	Device string
}

// SignIn is every password check (the dashboard's sign-in and the token
// route's password grant): the account's failure budget (internal/signin)
// is charged before the password is compared, so every route shares it.
// device is the client's device token ("" for none); remember asks for a
// device token to keep. Errors: ErrWrongPassword (also for an email that
// is not an address, an unknown one and a deleted account),
// *signin.LimitedError, *SuspendedError (the password was right),
// password.ErrBusy.
func (s *Service) SignIn(ctx context.Context, db dbutil.Executor, rawEmail, plain, device string, remember bool) (SignedIn, error) {
	email, err := emailaddr.Normalise(rawEmail)
	if err != nil {
		return SignedIn{}, ErrWrongPassword
	}
	acct, err := q.AccountGetByEmail(ctx, db, email)
	if dbutil.IsNotFound(err) {
		_ = s.Passwords.Verify(ctx, plain, dummyHash())
		return SignedIn{}, ErrWrongPassword
	}
	if err != nil {
		return SignedIn{}, fmt.Errorf("reading account: %w", err)
	}
	attempt, err := signin.Begin(ctx, db, acct.ID, device, s.now())
	if errors.Is(err, signin.ErrNoAccount) {
		return SignedIn{}, ErrWrongPassword
	}
	if err != nil {
		return SignedIn{}, err
	}
	if err := s.Passwords.Verify(ctx, plain, acct.PasswordHash); err != nil {
		if errors.Is(err, password.ErrMismatch) {
			return SignedIn{}, ErrWrongPassword // charged already
		}
		// Never compared: the check does not count.
		if aerr := attempt.Abandon(context.WithoutCancel(ctx), db); aerr != nil && s.Logger != nil {
			s.Logger.WarnContext(ctx, "error taking back a sign-in charge", slog.Any("error", aerr))
		}
		return SignedIn{}, fmt.Errorf("verifying password: %w", err)
	}
	if acct.DeletedAt != nil {
		return SignedIn{}, ErrWrongPassword
	}
	out := SignedIn{Account: acct.ID, Email: acct.Email}
	out.Device, err = attempt.Succeeded(ctx, db, s.now(), remember && acct.SuspendedAt == nil)
	if err != nil {
		return SignedIn{}, err
	}
	if acct.SuspendedAt != nil {
		st := State{ID: acct.ID, SuspendedAt: acct.SuspendedAt}
		if acct.SuspendedReason != nil {
			st.SuspendedReason = *acct.SuspendedReason
		}
		return SignedIn{}, &SuspendedError{State: st}
	}
	return out, nil
}
