package accounts

import (
	"errors"
	"fmt"
	"strconv"
)

// Typed errors of the account rules; adapters map them to their answers
// (api/: one mapping per resource).
var (
	// ErrEmailTaken: another account has the email.
	ErrEmailTaken = errors.New("an account with this email already exists")
	// ErrEmailBeingDeleted: the account holding the email is being
	// deleted; the email is free again once its data is gone.
	ErrEmailBeingDeleted = errors.New("an account with this email is being deleted; the email is free again once its data is gone (usually within minutes)")
	// ErrKeyNotFound: the account has no such active API key.
	ErrKeyNotFound = errors.New("API key not found")
	// ErrLastKey: revoking the key would leave the account without one.
	ErrLastKey = errors.New("this is the account's last active API key; create another before revoking it")
	// ErrDeleting: the account is being deleted.
	ErrDeleting = errors.New("the account is being deleted")
	// ErrAlreadySuspended: a suspension of a suspended account.
	ErrAlreadySuspended = errors.New("the account is already suspended")
	// ErrSuspendedOrDeleting: the account changed under a suspension.
	ErrSuspendedOrDeleting = errors.New("the account is already suspended or being deleted")
	// ErrNotSuspended: lifting a suspension that is not there.
	ErrNotSuspended = errors.New("the account is not suspended")
	// ErrSuspendSelf: an admin suspending their own account.
	ErrSuspendSelf = errors.New("you cannot suspend your own account")
	// ErrWrongPassword: no live account has this email and password.
	ErrWrongPassword = errors.New("wrong email or password")
)

// FieldError refuses an input field.
type FieldError struct {
	Field string
	// Err is emailaddr.ErrInvalid, emailaddr.ErrNoDomainName, the password
	// rule's error or ErrBlank.
	Err error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// ErrBlank refuses a field of white space only.
var ErrBlank = errors.New("must not be blank")

// KeyLabelTakenError: an active key of the account has the label.
type KeyLabelTakenError struct{ Label string }

func (e *KeyLabelTakenError) Error() string {
	return fmt.Sprintf("an API key labelled %q already exists", e.Label)
}

// TooManyKeysError: the account holds MaxActiveAPIKeys active keys.
type TooManyKeysError struct{ Max int }

func (e *TooManyKeysError) Error() string {
	return "the account already has " + strconv.Itoa(e.Max) + " active API keys, the most allowed; revoke one before creating another"
}

// SuspendedError refuses a right password of a suspended account.
type SuspendedError struct{ State State }

func (e *SuspendedError) Error() string { return e.State.SuspendedDetail() }
