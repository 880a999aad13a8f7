package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/internal/authproviders"
	"github.com/mailwatch/mailwatch/internal/dataapi"
)

// DataAPIOptions limits the /rest/v1 data API.
type DataAPIOptions struct {
	// MaxRows caps the rows of one response (DATA_API_MAX_ROWS); 1000 when 0.
	MaxRows int
	// StatementTimeout bounds one query (DATA_API_STATEMENT_TIMEOUT); 5 s when 0.
	StatementTimeout time.Duration
	// Pages caches answers to reads of the events table per subject, each
	// served only after the subject's newest event, read under RLS, is
	// found unchanged (EVENTS_PAGE_CACHE_TTL, EVENTS_PAGE_CACHE_BYTES); nil
	// caches nothing.
	Pages *dataapi.Pages
}

// DataAPIRequest documents GET /rest/v1/{table}; the query string is
// PostgREST's grammar, read by the handler.
type DataAPIRequest struct {
	Table  dataTable `path:"table" description:"One of the data API's tables (views of schema data_api); another name is 404 (PGRST205)."`
	Select string    `query:"select" description:"Comma-separated columns; * or absent for all."`
	Order  string    `query:"order" description:"column[.asc|.desc][.nullsfirst|.nullslast], comma-separated."`
	Limit  int       `query:"limit" minimum:"0" description:"At most DATA_API_MAX_ROWS (default 1000), which also applies when absent."`
	Offset int       `query:"offset" minimum:"0"`
	Or     string    `query:"or" description:"(cond,cond,...): any of them holds. A cond is column.[not.]op.value, and(...), or(...) or not.and(...)/not.or(...), at most 5 deep; not.or= negates the whole group. Values holding , or ) go in double quotes."`
	And    string    `query:"and" description:"(cond,cond,...): all of them hold, as or= (not.and= negates it)."`
	// Account is read by serveDataAPI itself; the field documents it.
	Account string `header:"X-Mailwatch-Account" format:"uuid" description:"With a linked identity provider's token: the account it is for. Required for such tokens (401 without it); ignored for mailwatch's own tokens."`
}

// dataTable is a data-API table name; the document lists them.
type dataTable string

// Enum implements jsonschema.Enum.
func (dataTable) Enum() []any { return anyList(dataapi.TableNames()) }

// DataAPIRows documents the response: a JSON array of rows, or one object
// with Accept: application/vnd.pgrst.object+json.
type DataAPIRows []map[string]any

// OpenAPIErrorBody implements the router's hook: data-API errors have
// PostgREST's shape, not {detail}.
func (DataAPIRows) OpenAPIErrorBody() any { return new(PostgRESTErrorBody) }

// PostgRESTErrorBody is PostgREST's error body.
type PostgRESTErrorBody struct {
	Code    string  `json:"code" validate:"required" description:"PostgREST's PGRSTnnn code or the Postgres SQLSTATE."`
	Message string  `json:"message" validate:"required"`
	Details *string `json:"details" validate:"required"`
	Hint    *string `json:"hint" validate:"required"`
}

const pgrstObject = "application/vnd.pgrst.object+json"

func (s *Server) dataAPIRoutes() {
	runner := &dataapi.Runner{DB: s.reads, MaxRows: s.deps.DataAPI.MaxRows, StatementTimeout: s.deps.DataAPI.StatementTimeout,
		Pages: s.deps.DataAPI.Pages}
	// A page short of the total (Prefer: count=exact) is 206, as PostgREST.
	s.router.alsoStatuses["GET /rest/v1/{table}"] = []int{http.StatusPartialContent}
	s.router.alsoStatuses["HEAD /rest/v1/{table}"] = []int{http.StatusPartialContent}
	HandleRaw(s.router, Endpoint[DataAPIRequest, DataAPIRows]{
		Method: "GET", Path: "/rest/v1/{table}", OperationID: "dataAPIRead", Tag: "data api", Auth: AuthJWT,
		Summary: "Read tenant rows (PostgREST grammar, row-level secured)",
		Description: "PostgREST's read grammar: select=, filters column=[not.]op.value with op one of eq, neq, gt, gte, lt, lte, " +
			"isdistinct, in.(a,b), is.null|not_null|true|false|unknown, like and ilike (text columns; * stands for %), " +
			"eq/gt/gte/lt/lte/like/ilike(any|all).{a,b}, cs and cd (array and jsonb columns), ov (arrays), " +
			"fts/plfts/phfts/wfts[(config)] (text and jsonb columns); or=(...)/and=(...) groups; at most 32 conditions. " +
			"An operator that does not apply to the column's type is 400 42883; match/imatch are 400 PGRST100. order=, limit=, offset=; " +
			"`Prefer: count=exact` adds the total to Content-Range (206 for a partial page, 416 past the end); " +
			"`Accept: application/vnd.pgrst.object+json` answers one object (406 PGRST116 unless exactly one row). " +
			"Authorization is a JWT from POST /api/auth/token or a linked identity provider (whose requests name their account " +
			"in X-Mailwatch-Account). Errors have PostgREST's " +
			"shape {code, message, details, hint}. Every query runs as database role `authenticated` under row-level " +
			"security on the token's claims. Limited like API keys, one budget per account for all the tokens that resolve to it.",
		Errors: []int{403, 404, 406, 414, 416},
	}, func(c *fiber.Ctx) error { return s.serveDataAPI(c, runner) })
	// HEAD (postgrest-js's head: true, usually with count=exact): the same
	// read, answered with its headers only (fasthttp drops the body).
	s.router.rawTypes["HEAD /rest/v1/{table}"] = "application/json"
	HandleRaw(s.router, Endpoint[DataAPIRequest, RawBody]{
		Method: "HEAD", Path: "/rest/v1/{table}", OperationID: "dataAPIHead", Tag: "data api", Auth: AuthJWT,
		Summary: "Count tenant rows without reading them (PostgREST HEAD)",
		Description: "The same read as GET with its headers only: with `Prefer: count=exact`, Content-Range carries the " +
			"total. postgrest-js sends it for `{ head: true }`.",
		Errors: []int{403, 404, 406, 414, 416},
	}, func(c *fiber.Ctx) error { return s.serveDataAPI(c, runner) })
}

func (s *Server) serveDataAPI(c *fiber.Ctx, runner *dataapi.Runner) error {
	ctx := c.UserContext()
	token, problem := bearerToken(c)
	var verified *verifiedToken
	if problem == "" {
		var err error
		verified, err = s.verifyDataToken(ctx, token, string(c.Request().Header.Peek(authproviders.AccountHeader)))
		if err != nil {
			var apiErr *Error
			if errors.As(err, &apiErr) {
				return pgrstError(c, s.logger, &dataapi.Error{Status: apiErr.Status, Code: "PGRST000", Message: apiErr.Detail}, apiErr.Cause)
			}
			if errors.Is(err, authproviders.ErrUnavailable) {
				// Our failure (the providers or links could not be read),
				// not the token's: retry later, not sign in again.
				return pgrstError(c, s.logger, &dataapi.Error{Status: http.StatusServiceUnavailable, Code: "PGRST000",
					Message: "the token's identity provider could not be looked up; try again"}, err)
			}
			// The cause may name another tenant's provider (its claims, its
			// JWKS URL): it goes to the log, not to the caller.
			s.logger.Debug("data API token refused", slog.Any("error", err))
			problem = "invalid JWT"
			if errors.Is(err, authproviders.ErrAccountNotNamed) {
				problem = err.Error()
			}
		}
	}
	limitKey := "ip:" + c.IP()
	if verified != nil {
		// One budget per account, whatever the token: mailwatch's own or a
		// linked provider's, for any of its subjects (a user linked by
		// email has as many as the provider mints).
		limitKey = "jwt:acct:" + verified.accountID
	}
	if err := s.router.guard.charge(c, limitKey); err != nil {
		var apiErr *Error
		if errors.As(err, &apiErr) {
			for k, v := range apiErr.Headers {
				c.Set(k, v)
			}
			return pgrstError(c, s.logger, &dataapi.Error{Status: apiErr.Status, Code: "PGRST000", Message: apiErr.Detail}, nil)
		}
		return err
	}
	if verified == nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
		return pgrstError(c, s.logger, &dataapi.Error{Status: http.StatusUnauthorized, Code: "PGRST301", Message: problem}, nil)
	}

	req, err := dataapi.Parse(string(c.Request().URI().QueryString()))
	if err != nil {
		return pgrstError(c, s.logger, err, nil)
	}
	call := dataapi.Call{
		Table:     strings.Clone(c.Params("table")),
		AccountID: verified.accountID,
		Claims:    verified.claims,
		Request:   req,
		RawQuery:  string(c.Request().URI().QueryString()),
		Count:     preferCountExact(string(c.Request().Header.Peek("Prefer"))),
		Singular:  acceptsObject(string(c.Request().Header.Peek(fiber.HeaderAccept))),
	}
	res, err := runner.Run(ctx, call)
	if err != nil {
		return pgrstError(c, s.logger, err, nil)
	}
	c.Set("Content-Range", res.ContentRange)
	if call.Singular {
		c.Set(fiber.HeaderContentType, pgrstObject+"; charset=utf-8")
	} else {
		c.Set(fiber.HeaderContentType, "application/json; charset=utf-8")
	}
	return c.Status(res.Status).Send(withNewline(res.Body))
}

// withNewline ends a JSON answer with a newline, as every other JSON answer
// of the API does (encodeJSON). It copies: b may be a cached value shared
// by concurrent requests.
func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b
	}
	out := make([]byte, len(b)+1)
	copy(out, b)
	out[len(b)] = '\n'
	return out
}

func preferCountExact(h string) bool {
	for _, part := range strings.Split(h, ",") {
		if strings.TrimSpace(part) == "count=exact" {
			return true
		}
	}
	return false
}

func acceptsObject(h string) bool {
	for _, part := range strings.Split(h, ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == pgrstObject {
			return true
		}
	}
	return false
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// pgrstError writes err in PostgREST's shape; unexpected errors are logged
// once and answered without their text.
func pgrstError(c *fiber.Ctx, logger *slog.Logger, err error, cause error) error {
	var e *dataapi.Error
	if !errors.As(err, &e) {
		status, msg := http.StatusInternalServerError, "internal server error"
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			status, msg = http.StatusServiceUnavailable, "the request took too long and was abandoned; try again"
		} else {
			logger.ErrorContext(c.UserContext(), "data API request failed", slog.String("request_id", requestID(c)), slog.Any("error", err))
		}
		e = &dataapi.Error{Status: status, Code: "PGRST000", Message: msg}
	}
	if cause != nil && e.Status >= 500 {
		logger.ErrorContext(c.UserContext(), "data API request failed", slog.String("request_id", requestID(c)), slog.Any("error", cause))
	}
	body, _ := json.Marshal(PostgRESTErrorBody{Code: e.Code, Message: e.Message, Details: strPtr(e.Details), Hint: strPtr(e.Hint)})
	c.Set(fiber.HeaderContentType, "application/json; charset=utf-8")
	return c.Status(e.Status).Send(append(body, '\n'))
}

// verifiedToken is a data-API caller.
type verifiedToken struct {
	// accountID is the account the token resolves to, which also names the
	// rate-limit budget the request draws on.
	accountID string
	// claims are set as request.jwt.claims; "sub" is the account id.
	claims []byte
	// issuedAt is the iat of a token mailwatch issued (zero for a linked
	// provider's token): one issued before the account's last password
	// change is refused (account_state.go).
	issuedAt time.Time
}

// verifiedCache remembers mailwatch's own verified tokens until they
// expire, so a client reading page after page pays for one signature check.
// A token cannot be revoked and a retired key verifies until its tokens
// expire, so the cache never accepts a token that verification would refuse.
type verifiedCache struct {
	mu      sync.Mutex
	entries map[[32]byte]cachedToken
}

type cachedToken struct {
	v   *verifiedToken
	exp time.Time
}

const verifiedCacheMax = 50_000

func (c *verifiedCache) get(key [32]byte, now time.Time) *verifiedToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.exp) {
		return nil
	}
	return e.v
}

func (c *verifiedCache) put(key [32]byte, v *verifiedToken, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= verifiedCacheMax {
		c.entries = map[[32]byte]cachedToken{}
	}
	c.entries[key] = cachedToken{v: v, exp: exp}
}

// verifyDataToken accepts mailwatch's own tokens (and, in authproviders.go,
// linked providers' tokens for the account the request names).
func (s *Server) verifyDataToken(ctx context.Context, token, account string) (*verifiedToken, error) {
	is, err := s.requireIdentity()
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(token))
	if v := s.tokens.get(key, s.now()); v != nil {
		return v, s.checkTokenAccount(ctx, v)
	}
	if s.verifyProviderToken != nil {
		if v, handled, err := s.verifyProviderToken(ctx, token, is.Issuer(), account); handled {
			if err != nil {
				return v, err
			}
			return v, s.checkTokenAccount(ctx, v)
		}
	}
	claims, err := is.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	v := &verifiedToken{accountID: claims.Subject, claims: raw, issuedAt: claims.IssuedAt.Time}
	s.tokens.put(key, v, claims.ExpiresAt.Time)
	return v, s.checkTokenAccount(ctx, v)
}
