package api

import (
	"context"
	"errors"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/signin"
	"github.com/mailwatch/mailwatch/jobs"
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

// normalizeEmail trims and lower-cases an address and checks that it is a
// bare addr-spec with a dotted domain.
func normalizeEmail(field, raw string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || addr.Name != "" {
		return "", InvalidField(field, "must be a valid email address such as name@example.com")
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.HasPrefix(domain, "[") {
		return "", InvalidField(field, "must be a valid email address with a domain name such as example.com")
	}
	return s, nil
}

func checkPassword(field, p string) error {
	if err := password.Validate(p); err != nil {
		return InvalidField(field, err.Error())
	}
	return nil
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
		Call: func(ctx context.Context, _ *emptyRequest) (*Account, error) {
			row, err := s.q.AccountGetByID(ctx, s.db, mustCaller(ctx).AccountID)
			if dbutil.IsNotFound(err) {
				return nil, NotFound("account")
			}
			if err != nil {
				return nil, err
			}
			a := accountFromRow(row)
			return &a, nil
		},
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

func (s *Server) createAccount(ctx context.Context, req *CreateAccountRequest) (*CreateAccountResponse, error) {
	email, err := normalizeEmail("email", req.Email)
	if err != nil {
		return nil, err
	}
	if err := checkPassword("password", req.Password); err != nil {
		return nil, err
	}
	hash, err := s.hashPassword(ctx, req.Password)
	if err != nil {
		return nil, err
	}
	key := apikey.Generate()
	out, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*CreateAccountResponse, error) {
		acct, err := s.q.AccountInsert(ctx, tx, dbsqlc.AccountInsertParams{ID: uuid.Must(uuid.NewV7()), Email: email, PasswordHash: hash})
		if err != nil {
			return nil, err
		}
		row, err := s.q.APIKeyInsert(ctx, tx, dbsqlc.APIKeyInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: acct.ID, Label: "default", KeyIdentifier: key.Identifier, KeyHash: key.Hash,
		})
		if err != nil {
			return nil, err
		}
		// The sign-in address gets notification mail once verified.
		if _, err := notify.ReplaceLogin(ctx, tx, s.deps.River, acct.ID, email, s.now()); err != nil {
			return nil, err
		}
		return &CreateAccountResponse{Account: accountFromRow(acct), APIKey: NewAPIKey{APIKey: apiKeyFromRow(row), Key: key.Plain}}, nil
	})
	if dbutil.IsUniqueViolation(err, "accounts_email_key") {
		return nil, s.emailTaken(ctx, email)
	}
	return out, err
}

func (s *Server) updateAccount(ctx context.Context, req *UpdateAccountRequest) (*Account, error) {
	caller := mustCaller(ctx)
	params := dbsqlc.AccountUpdateParams{ID: caller.AccountID}
	if req.Email != nil {
		email, err := normalizeEmail("email", *req.Email)
		if err != nil {
			return nil, err
		}
		params.Email = &email
	}
	if req.Password != nil {
		if err := checkPassword("password", *req.Password); err != nil {
			return nil, err
		}
		hash, err := s.hashPassword(ctx, *req.Password)
		if err != nil {
			return nil, err
		}
		params.PasswordHash = &hash
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Account, error) {
		prev, err := s.q.AccountGetByID(ctx, tx, caller.AccountID)
		if err != nil {
			return dbsqlc.Account{}, err
		}
		row, err := s.q.AccountUpdate(ctx, tx, params)
		if err != nil {
			return row, err
		}
		if row.Email != prev.Email {
			// A new sign-in address replaces the old one among the
			// notification addresses and must be verified again.
			if _, err := notify.ReplaceLogin(ctx, tx, s.deps.River, row.ID, row.Email, s.now()); err != nil {
				return row, err
			}
		}
		if params.PasswordHash == nil {
			return row, nil
		}
		// Tokens and sessions issued before now are refused from now on.
		changed, err := s.q.AccountSetCredentialsChanged(ctx, tx, dbsqlc.AccountSetCredentialsChangedParams{
			ID: caller.AccountID, ChangedAt: s.now().UTC()})
		if err != nil {
			return row, err
		}
		// Every dashboard session ends with the change, the session that
		// made it included (it signs in again with the new password).
		if err := accounts.EndSessions(ctx, tx, caller.AccountID); err != nil {
			return row, err
		}
		// Known devices earned their trust with the old password.
		if err := signin.ForgetDevices(ctx, tx, caller.AccountID); err != nil {
			return row, err
		}
		_, err = s.deps.Emitter.Emit(ctx, tx, events.Event{AccountID: caller.AccountID, Type: events.TypePasswordChanged,
			Payload: map[string]any{"key_identifier": caller.KeyIdentifier, "changed_at": changed.UTC().Format(time.RFC3339Nano)}})
		return row, err
	})
	if dbutil.IsUniqueViolation(err, "accounts_email_key") {
		return nil, s.emailTaken(ctx, *params.Email)
	}
	if err == nil && params.PasswordHash != nil {
		s.accountStates.Evict(caller.AccountID)
	}
	if dbutil.IsNotFound(err) {
		return nil, NotFound("account")
	}
	if err != nil {
		return nil, err
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

func (s *Server) deleteAccount(ctx context.Context, _ *emptyRequest) (*AccountDeletion, error) {
	caller := mustCaller(ctx)
	type marked struct {
		out    AccountDeletion
		hashes [][]byte
	}
	m, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*marked, error) {
		keys, err := s.q.APIKeyListByAccount(ctx, tx, caller.AccountID)
		if err != nil {
			return nil, err
		}
		at, err := s.q.AccountMarkDeleting(ctx, tx, caller.AccountID)
		if dbutil.IsNotFound(err) {
			return nil, NotFound("account")
		}
		if err != nil {
			return nil, err
		}
		job, err := s.deps.River.InsertTx(ctx, tx, jobs.AccountDeleteArgs{AccountID: caller.AccountID}, nil)
		if err != nil {
			return nil, err
		}
		m := &marked{out: AccountDeletion{ID: caller.AccountID, Status: "deleting", DeletedAt: at.UTC(), JobID: job.Job.ID}}
		for _, k := range keys {
			m.hashes = append(m.hashes, k.KeyHash)
		}
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	s.forgetAccount(caller.AccountID, m.hashes)
	return &m.out, nil
}

// emailTaken is the 409 for an email another account holds; an account
// being deleted keeps its email until its data is gone, and says so.
func (s *Server) emailTaken(ctx context.Context, email string) error {
	if other, err := s.q.AccountGetByEmail(ctx, s.db, email); err == nil && other.DeletedAt != nil {
		return Conflict("an account with this email is being deleted; the email is free again once its data is gone (usually within minutes)")
	}
	return Conflict("an account with this email already exists")
}

// hashPassword hashes within the process's argon2id bound (Deps.Passwords);
// a full queue is a 503 that says when to retry.
func (s *Server) hashPassword(ctx context.Context, p string) (string, error) {
	hash, err := s.deps.Passwords.Hash(ctx, p)
	return hash, passwordBusy(err)
}

// verifyPassword checks p against encoded within the same bound as
// hashPassword: every sign-in path goes through it.
func (s *Server) verifyPassword(ctx context.Context, p, encoded string) error {
	return passwordBusy(s.deps.Passwords.Verify(ctx, p, encoded))
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
