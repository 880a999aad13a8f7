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

	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/password"
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
	Email    string `json:"email" validate:"required,max=254" description:"Login identity; stored lower-cased."`
	Password string `json:"password" validate:"required" minLength:"8" maxLength:"256" description:"8 to 256 characters; stored as an argon2id hash only."`
}

// CreateAccountResponse carries the new account and its first API key.
type CreateAccountResponse struct {
	Account Account   `json:"account" validate:"required"`
	APIKey  NewAPIKey `json:"api_key" validate:"required" description:"The account's first key, labelled \"default\". The full key is shown only here."`
}

// UpdateAccountRequest is the body of PATCH /api/accounts/me.
type UpdateAccountRequest struct {
	Email    *string `json:"email,omitempty" validate:"omitempty,max=254"`
	Password *string `json:"password,omitempty" minLength:"8" maxLength:"256"`
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
	Handle(s.router, Endpoint[CreateAccountRequest, CreateAccountResponse]{
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
		Summary:     "Change the account's email or password",
		Description: "Only the fields present change. A new email must be free (409); it replaces the old sign-in address among the notification addresses and must be verified (a verification mail is queued).",
		Errors:      []int{409},
		Call:        s.updateAccount,
	})
	Handle(s.router, Endpoint[emptyRequest, NoContent]{
		Method: "DELETE", Path: "/api/accounts/me", Status: 204, OperationID: "deleteAccount", Tag: "accounts",
		Summary:     "Delete the account and everything it owns",
		Description: "Removes the account, its keys and all its data. Its keys answer 401 at once on this replica and within 5 s everywhere.",
		Call:        s.deleteAccount,
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
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*CreateAccountResponse, error) {
		acct, err := s.q.AccountInsert(ctx, tx, dbsqlc.AccountInsertParams{ID: uuid.Must(uuid.NewV7()), Email: email, PasswordHash: hash})
		if dbutil.IsUniqueViolation(err, "accounts_email_key") {
			return nil, Conflict("an account with this email already exists")
		}
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
		if _, err := notify.ReplaceLogin(ctx, tx, s.deps.River, acct.ID, email); err != nil {
			return nil, err
		}
		return &CreateAccountResponse{Account: accountFromRow(acct), APIKey: NewAPIKey{APIKey: apiKeyFromRow(row), Key: key.Plain}}, nil
	})
}

func (s *Server) updateAccount(ctx context.Context, req *UpdateAccountRequest) (*Account, error) {
	caller := mustCaller(ctx)
	params := dbsqlc.AccountUpdateParams{ID: caller.AccountID}
	if req.Email == nil && req.Password == nil {
		return nil, InvalidField("email", "give email or password (or both) to change")
	}
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
		if err != nil || row.Email == prev.Email {
			return row, err
		}
		// A new sign-in address replaces the old one among the
		// notification addresses and must be verified again.
		_, err = notify.ReplaceLogin(ctx, tx, s.deps.River, row.ID, row.Email)
		return row, err
	})
	if dbutil.IsUniqueViolation(err, "accounts_email_key") {
		return nil, Conflict("an account with this email already exists")
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

func (s *Server) deleteAccount(ctx context.Context, _ *emptyRequest) (*NoContent, error) {
	caller := mustCaller(ctx)
	hashes, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) ([][]byte, error) {
		keys, err := s.q.APIKeyListByAccount(ctx, tx, caller.AccountID)
		if err != nil {
			return nil, err
		}
		n, err := s.q.AccountDelete(ctx, tx, caller.AccountID)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, NotFound("account")
		}
		hashes := make([][]byte, len(keys))
		for i, k := range keys {
			hashes[i] = k.KeyHash
		}
		return hashes, nil
	})
	if err != nil {
		return nil, err
	}
	for _, h := range hashes {
		s.router.guard.evict(h)
	}
	return &NoContent{}, nil
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
