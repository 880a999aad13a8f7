package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/identity"
)

// TokenRequest is the optional body of POST /api/auth/token: an email and
// password, when no API key is sent.
type TokenRequest struct {
	Email    string `json:"email,omitempty" validate:"omitempty,max=254" description:"With password, when no Authorization header is sent."`
	Password string `json:"password,omitempty" validate:"omitempty,max=256"`
}

// TokenResponse is an OAuth 2.0-style access token (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token" validate:"required" description:"An ES256 JWT: sub = account id, role = authenticated, aud, iss, exp, kid."`
	TokenType   string `json:"token_type" validate:"required" enum:"Bearer"`
	ExpiresIn   int    `json:"expires_in" validate:"required" description:"Seconds until the token expires (at most 900)."`
}

// JWKSet documents /.well-known/jwks.json (RFC 7517 section 5).
type JWKSet struct {
	Keys []map[string]any `json:"keys" validate:"required" description:"The public keys that verify mailwatch's tokens: the current one, the next one and recently retired ones."`
}

func (s *Server) tokenRoutes() {
	HandleRaw(s.router, Endpoint[TokenRequest, TokenResponse]{
		Method: "POST", Path: "/api/auth/token", OperationID: "issueToken", Tag: "identity", Auth: AuthNone,
		Summary: "Exchange an API key, or an email and password, for a data-API token",
		Description: "Send `Authorization: Bearer <api key>` with no body, or no Authorization header and a JSON body " +
			"{email, password}. The answer's access_token is a JWT of at most 15 minutes for the data API (`/rest/v1`), " +
			"verifiable with the keys at /.well-known/jwks.json. A wrong key or password is 401; a suspended account is 403. " +
			"Tokens issued before the account's last password change are refused by the data API. Limited per client IP; " +
			"wrong passwords are also limited per account, together with the dashboard's sign-in: after 10 in a row, each further one " +
			"closes the password grant of that account for twice as long as the last (1 minute, 2, 4, ... at most 1 hour), and " +
			"meanwhile every password, the right one too, is 429 with Retry-After. A browser that signed in to the dashboard " +
			"recently and sends its mw_device cookie has a budget of its own; the API-key grant is never limited this way.",
		Errors: []int{401, 403, 429},
	}, s.issueToken)
	s.tokenNulls = s.router.bodyNullRule("POST", "/api/auth/token")
	s.router.rawTypes["GET /.well-known/jwks.json"] = "application/json"
	HandleRaw(s.router, Endpoint[emptyRequest, JWKSet]{
		Method: "GET", Path: "/.well-known/jwks.json", OperationID: "jwks", Tag: "identity", Auth: AuthOps,
		Summary:     "The public keys of mailwatch's tokens (JWK Set)",
		Description: "ES256 keys with kid, alg and use. A key is published before it signs and stays until the tokens it signed have expired.",
	}, s.jwks)
}

func (s *Server) requireIdentity() (*identity.Issuer, error) {
	if s.deps.Identity == nil {
		return nil, Unavailable("token issuance is not configured (MAILWATCH_SECRET_KEY is unset)")
	}
	return s.deps.Identity, nil
}

func (s *Server) issueToken(c *fiber.Ctx) error {
	ctx := c.UserContext()
	is, err := s.requireIdentity()
	if err != nil {
		return err
	}
	var (
		accountID uuid.UUID
		email     string
	)
	// A body is read whatever the credentials: one that is not the
	// documented object is refused, even beside an API key.
	req := new(TokenRequest)
	if len(bytes.TrimSpace(c.Body())) > 0 {
		if err := decodeJSON(c.Body(), req); err != nil {
			return err
		}
		if err := s.tokenNulls.check(c.Body()); err != nil {
			return err
		}
		if err := s.router.validate(req); err != nil {
			return err
		}
	}
	if h := c.Request().Header.Peek(fiber.HeaderAuthorization); len(h) > 0 {
		token, problem := bearerToken(c)
		if problem != "" {
			return unauthorized(problem)
		}
		if !apikey.WellFormed(token) {
			return unauthorized("invalid API key")
		}
		caller, found, err := s.router.guard.lookup(ctx, token)
		if err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Detail: "authentication is temporarily unavailable", Cause: err}
		}
		if !found {
			return unauthorized("invalid or revoked API key")
		}
		if caller.suspended != "" {
			return &Error{Status: http.StatusForbidden, Detail: caller.suspended}
		}
		accountID = caller.AccountID
	} else {
		if req.Email == "" || req.Password == "" {
			return unauthorized("send Authorization: Bearer <api key>, or a JSON body with email and password")
		}
		// A browser that signed in to the dashboard sends its device
		// cookie here too; the route never sets one.
		in, err := s.checkPassword(ctx, req.Email, req.Password, strings.Clone(c.Cookies(deviceCookie)), false)
		if err != nil {
			return err
		}
		accountID, email = in.Account, in.Email
	}
	// A token signed in the second of a password change would be refused
	// (iat has whole seconds): wait for the next second.
	st, err := s.accountStates.Get(ctx, s.db, accountID)
	if err != nil && !errors.Is(err, accounts.ErrNotFound) {
		return err
	}
	if err := accounts.WaitPastChange(ctx, st, s.now()); err != nil {
		return err
	}
	tok, err := is.Sign(ctx, accountID, email)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return writeResponse(c, http.StatusOK, &TokenResponse{AccessToken: tok.AccessToken, TokenType: "Bearer", ExpiresIn: tok.ExpiresIn})
}

// signedIn is the outcome of a right password.
type signedIn = accounts.SignedIn

// checkPassword is every password check (the dashboard's sign-in and the
// token route's password grant; accounts.Service.SignIn shares the
// account's failure budget between them). device is the client's
// mw_device cookie ("" for none); remember asks for a device token to keep.
func (s *Server) checkPassword(ctx context.Context, rawEmail, plain, device string, remember bool) (signedIn, error) {
	in, err := s.accountService().SignIn(ctx, s.db, rawEmail, plain, device, remember)
	return in, accountError(err)
}

func (s *Server) jwks(c *fiber.Ctx) error {
	is, err := s.requireIdentity()
	if err != nil {
		return err
	}
	raw, err := is.JWKS(c.UserContext())
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(http.StatusOK).Send(withNewline(raw))
}
