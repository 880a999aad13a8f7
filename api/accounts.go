package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/emailaddr"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/signin"
)

// Account is an account as the API shows it.
type Account struct {
	ID        uuid.UUID `json:"id" validate:"required"`
	Email     string    `json:"email" validate:"required"`
	IsAdmin   bool      `json:"is_admin" validate:"required" description:"Admins may use the /api/admin routes."`
	CreatedAt time.Time `json:"created_at" validate:"required"`
	UpdatedAt time.Time `json:"updated_at" validate:"required"`
}

func accountFromRow(a dbsqlc.Account) Account {
	return Account{ID: a.ID, Email: a.Email, IsAdmin: a.IsAdmin, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
}

// CreateAccountRequest is the body of POST /api/accounts.
type CreateAccountRequest struct {
	Email    string `json:"email" validate:"required,max=254,email_address" example:"alice@example.com" description:"Login identity; stored lower-cased."`
	Password string `json:"password" validate:"required,min=8,max=256,not_blank" description:"8 to 256 characters; stored as an argon2id hash only."`
}

// CreateAccountResponse carries the new account and its first API key.
type CreateAccountResponse struct {
	Account Account   `json:"account" validate:"required"`
	APIKey  NewAPIKey `json:"api_key" validate:"required" description:"The account's first key, labelled \"default\". The full key is shown only here."`
}

// UpdateAccountRequest is the body of PATCH /api/accounts/me.
type UpdateAccountRequest struct {
	_        atLeastOne
	Email    *string `json:"email,omitempty" validate:"omitempty,max=254,email_address" example:"alice@example.org"`
	Password *string `json:"password,omitempty" validate:"omitempty,min=8,max=256,not_blank"`
}

// normalizeEmail is the one email normaliser (internal/emailaddr) with
// its refusal as a 422 naming field.
func normalizeEmail(field, raw string) (string, error) {
	email, err := accounts.NormaliseEmail(field, raw)
	if err != nil {
		return "", accountError(err)
	}
	return email, nil
}

// accountService is the account rules' service over this server's dependencies.
func (s *Server) accountService() *accounts.Service {
	return &accounts.Service{River: s.deps.River, Emitter: s.deps.Emitter, Passwords: s.deps.Passwords, Logger: s.logger, Now: s.now}
}

// accountError is the one mapping of the account rules' errors (accounts,
// API keys, sign-in, suspension) to answers.
func accountError(err error) error {
	var (
		field   *accounts.FieldError
		limited *signin.LimitedError
		labeled *accounts.KeyLabelTakenError
		tooMany *accounts.TooManyKeysError
		susp    *accounts.SuspendedError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &field):
		return InvalidField(field.Field, fieldMessage(field.Err))
	case errors.Is(err, accounts.ErrNotFound):
		return NotFound("account")
	case errors.Is(err, accounts.ErrKeyNotFound):
		return NotFound("API key")
	case errors.Is(err, accounts.ErrWrongPassword):
		return unauthorized(accounts.ErrWrongPassword.Error())
	case errors.As(err, &limited):
		return &Error{Status: http.StatusTooManyRequests, Detail: limited.Error(),
			Headers: map[string]string{fiber.HeaderRetryAfter: strconv.FormatInt(limited.Seconds(), 10)}}
	case errors.As(err, &susp):
		return &Error{Status: http.StatusForbidden, Detail: susp.Error()}
	case errors.As(err, &labeled), errors.As(err, &tooMany), errors.Is(err, accounts.ErrEmailTaken),
		errors.Is(err, accounts.ErrEmailBeingDeleted), errors.Is(err, accounts.ErrLastKey), errors.Is(err, accounts.ErrDeleting),
		errors.Is(err, accounts.ErrAlreadySuspended), errors.Is(err, accounts.ErrSuspendedOrDeleting),
		errors.Is(err, accounts.ErrNotSuspended), errors.Is(err, accounts.ErrSuspendSelf):
		return Conflict("%s", err.Error())
	}
	return passwordBusy(err)
}

// fieldMessage is the 422 message of a refused field.
func fieldMessage(err error) string {
	switch {
	case errors.Is(err, emailaddr.ErrInvalid):
		return "must be a valid email address such as name@example.com"
	case errors.Is(err, emailaddr.ErrNoDomainName):
		return "must be a valid email address with a domain name such as example.com"
	}
	return err.Error()
}

func (s *Server) accountRoutes() {
	s.ops.CreateAccount = Handle(s.router, Endpoint[CreateAccountRequest, CreateAccountResponse]{
		Method: "POST", Path: "/api/accounts", Status: 201, OperationID: "createAccount", Tag: "accounts", Auth: AuthNone,
		Summary:     "Create an account",
		Description: "Creates an account and its first API key. No authentication; limited per client IP. The key is shown once.",
		Errors:      []int{409},
		Call:        s.createAccount,
	})
	Handle(s.router, Endpoint[emptyRequest, Account]{
		Method: "GET", Path: "/api/accounts/me", OperationID: "getAccount", Tag: "accounts",
		Summary: "The calling key's account",
		Call:    s.getAccount,
	})
	Handle(s.router, Endpoint[UpdateAccountRequest, Account]{
		Method: "PATCH", Path: "/api/accounts/me", OperationID: "updateAccount", Tag: "accounts",
		Summary: "Change the account's email or password",
		Description: "Only the fields present change. A new email must be free (409); it replaces the old sign-in address " +
			"among the notification addresses and must be verified (a verification mail is queued). A password change revokes every " +
			"data-API token (POST /api/auth/token) issued before it (401 from then on, on every replica within 4 s), " +
			"ends every dashboard session of the account (the one that made the change too), forgets the browsers known for sign-in and emits password_changed; API keys are not sessions and stay valid (revoke them " +
			"with DELETE .../api-keys/{id}).",
		Errors: []int{409},
		Call:   s.updateAccount,
	})
	Handle(s.router, Endpoint[emptyRequest, AccountDeletion]{
		Method: "DELETE", Path: "/api/accounts/me", Status: 202, OperationID: "deleteAccount", Tag: "accounts",
		Summary: "Delete the account and everything it owns",
		Description: "Marks the account deleted and answers 202: its keys answer 401 at once on this replica and within " +
			"5 s everywhere, and its data-API tokens are refused. A River job (account_delete, job_id) then removes " +
			"everything it owns in batches of 1,000 rows: its jobs not yet run are cancelled, its receivers' SMS " +
			"numbers go back to the pool, its DNS connections' credentials are deleted, then every row of every " +
			"table, the account last. Until that job has finished the email stays taken: signing up with it is 409.",
		Call: s.deleteAccount,
	})
}

// createAccount serves POST /api/accounts: create an account.
func (s *Server) createAccount(ctx context.Context, req *CreateAccountRequest) (*CreateAccountResponse, error) {
	out, err := s.accountService().Create(ctx, s.db, req.Email, req.Password)
	if err != nil {
		return nil, accountError(err)
	}
	return &CreateAccountResponse{Account: accountFromRow(out.Account), APIKey: NewAPIKey{APIKey: apiKeyFromRow(out.Key), Key: out.Plain}}, nil
}

// getAccount serves GET /api/accounts/me: the calling key's account.
func (s *Server) getAccount(ctx context.Context, _ *emptyRequest) (*Account, error) {
	row, err := s.q.AccountGetByID(ctx, s.db, mustCaller(ctx).AccountID)
	if dbutil.IsNotFound(err) {
		return nil, NotFound("account")
	}
	if err != nil {
		return nil, err
	}
	a := accountFromRow(row)
	return &a, nil
}

// updateAccount serves PATCH /api/accounts/me: change the account's email or password.
func (s *Server) updateAccount(ctx context.Context, req *UpdateAccountRequest) (*Account, error) {
	caller := mustCaller(ctx)
	row, err := s.accountService().Update(ctx, s.db, caller.AccountID,
		accounts.Change{Email: req.Email, Password: req.Password, KeyIdentifier: caller.KeyIdentifier})
	if err != nil {
		return nil, accountError(err)
	}
	if req.Password != nil {
		s.accountStates.Evict(caller.AccountID)
	}
	a := accountFromRow(row)
	return &a, nil
}

// AccountDeletion answers DELETE /api/accounts/me.
type AccountDeletion struct {
	ID        uuid.UUID `json:"id" validate:"required"`
	Status    string    `json:"status" validate:"required" enum:"deleting"`
	DeletedAt time.Time `json:"deleted_at" validate:"required" description:"When deletion was asked for; the account's keys stopped then."`
	JobID     int64     `json:"job_id" validate:"required" description:"The River job (kind account_delete) removing the account's data; River UI shows its progress."`
}

// deleteAccount serves DELETE /api/accounts/me: delete the account and everything it owns.
func (s *Server) deleteAccount(ctx context.Context, _ *emptyRequest) (*AccountDeletion, error) {
	caller := mustCaller(ctx)
	d, err := s.accountService().MarkDeleting(ctx, s.db, caller.AccountID)
	if err != nil {
		return nil, accountError(err)
	}
	s.forgetAccount(caller.AccountID, d.KeyHashes)
	return &AccountDeletion{ID: caller.AccountID, Status: "deleting", DeletedAt: d.At.UTC(), JobID: d.JobID}, nil
}

// passwordBusy turns a full hashing queue into a 503 that says when to retry.
func passwordBusy(err error) error {
	if !errors.Is(err, password.ErrBusy) {
		return err
	}
	secs := strconv.Itoa(int(password.RetryAfter / time.Second))
	return &Error{
		Status:  http.StatusServiceUnavailable,
		Detail:  "too many passwords are being hashed on this server right now; retry in " + secs + " seconds",
		Headers: map[string]string{fiber.HeaderRetryAfter: secs},
	}
}
