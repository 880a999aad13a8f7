package api

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/ulule/limiter/v3"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/usage"
)

// Caller is the authenticated identity of a request.
type Caller struct {
	AccountID     uuid.UUID
	KeyID         uuid.UUID
	KeyIdentifier string
	IsAdmin       bool
	// suspended is the 403 detail of a suspended account's key; empty
	// otherwise. Cached with the key (keyCacheTTL).
	suspended string
}

// CallerFrom returns the caller stored in ctx by the auth middleware.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying caller; tests use it to call services.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey, c)
}

func mustCaller(ctx context.Context) Caller {
	c, ok := CallerFrom(ctx)
	if !ok {
		panic("api: handler of an authenticated route called without a caller")
	}
	return c
}

// keyCacheTTL bounds how long a replica may keep trusting a key another
// replica revoked: revocation reaches every replica within this time.
const keyCacheTTL = 4 * time.Second

// keyCacheMax bounds the cache; it is cleared when full.
const keyCacheMax = 100_000

type cachedKey struct {
	caller  Caller
	expires time.Time
}

// guard authenticates keys and applies rate limits.
type guard struct {
	db      dbutil.Executor
	q       *dbsqlc.Queries
	limiter *limiter.Limiter
	ingress *limiter.Limiter
	usage   *usage.Tracker
	logger  *slog.Logger
	now     func() time.Time

	mu    sync.RWMutex
	cache map[[32]byte]cachedKey
}

func (g *guard) lookup(ctx context.Context, plain string) (Caller, bool, error) {
	var hash [32]byte = sha256.Sum256([]byte(plain))
	now := g.now()
	g.mu.RLock()
	ck, ok := g.cache[hash]
	g.mu.RUnlock()
	if ok && now.Before(ck.expires) {
		return ck.caller, true, nil
	}
	row, err := g.q.APIKeyGetByHash(ctx, g.db, apikey.Hash(plain))
	if dbutil.IsNotFound(err) {
		g.evict(hash[:])
		return Caller{}, false, nil
	}
	if err != nil {
		return Caller{}, false, err
	}
	caller := Caller{AccountID: row.AccountID, KeyID: row.ID, KeyIdentifier: row.KeyIdentifier, IsAdmin: row.IsAdmin}
	if row.SuspendedAt != nil {
		caller.suspended = accounts.State{SuspendedAt: row.SuspendedAt, SuspendedReason: derefOr(row.SuspendedReason)}.SuspendedDetail()
	}
	g.mu.Lock()
	if len(g.cache) >= keyCacheMax {
		clear(g.cache)
	}
	g.cache[hash] = cachedKey{caller: caller, expires: now.Add(keyCacheTTL)}
	g.mu.Unlock()
	return caller, true, nil
}

// evict forgets a key at once on this replica (after revocation).
func (g *guard) evict(hash []byte) {
	var k [32]byte
	copy(k[:], hash)
	g.mu.Lock()
	delete(g.cache, k)
	g.mu.Unlock()
}

func bearerToken(c *fiber.Ctx) (string, string) {
	h := string(c.Request().Header.Peek(fiber.HeaderAuthorization))
	if h == "" {
		return "", "missing Authorization header; send Authorization: Bearer <api key>"
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", "malformed Authorization header; send Authorization: Bearer <api key>"
	}
	return strings.TrimSpace(token), ""
}

// requireKey authenticates the bearer key, then charges the key's budget
// (or, when authentication fails, the client IP's budget, so that guessing
// keys is rate-limited too).
func (g *guard) requireKey(adminOnly bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		token, problem := bearerToken(c)
		var (
			caller Caller
			found  bool
		)
		if problem == "" {
			if !apikey.WellFormed(token) {
				problem = "invalid API key"
			} else {
				var err error
				caller, found, err = g.lookup(c.UserContext(), token)
				if err != nil {
					return &Error{Status: fiber.StatusServiceUnavailable, Detail: "authentication is temporarily unavailable", Cause: err}
				}
				if !found {
					problem = "invalid or revoked API key"
				}
			}
		}
		limitKey := "ip:" + c.IP()
		if found {
			limitKey = "key:" + caller.KeyID.String()
		}
		if err := g.charge(c, limitKey); err != nil {
			return err
		}
		if !found {
			return unauthorized(problem)
		}
		if adminOnly && !caller.IsAdmin {
			return &Error{Status: fiber.StatusNotFound, Detail: "no route for " + c.Method() + " " + c.Path()}
		}
		if caller.suspended != "" {
			return &Error{Status: fiber.StatusForbidden, Detail: caller.suspended}
		}
		g.usage.Record(caller.KeyID, g.now())
		c.SetUserContext(WithCaller(c.UserContext(), caller))
		return c.Next()
	}
}

// limitByIP charges unauthenticated routes to the client IP's budget in
// lim; prefix keeps budgets of different limiters apart in a shared store.
func (g *guard) limitByIP(lim *limiter.Limiter, prefix string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := g.chargeWith(c, lim, prefix+c.IP()); err != nil {
			return err
		}
		return c.Next()
	}
}

func (g *guard) charge(c *fiber.Ctx, key string) error { return g.chargeWith(c, g.limiter, key) }

func (g *guard) chargeWith(c *fiber.Ctx, lim *limiter.Limiter, key string) error {
	lc, err := lim.Get(c.UserContext(), key)
	if err != nil {
		// A rate-limit store outage must not take the API down with it.
		g.logger.WarnContext(c.UserContext(), "rate limiter unavailable; request allowed", slog.Any("error", err))
		return nil
	}
	c.Set("X-RateLimit-Limit", strconv.FormatInt(lc.Limit, 10))
	c.Set("X-RateLimit-Remaining", strconv.FormatInt(lc.Remaining, 10))
	c.Set("X-RateLimit-Reset", strconv.FormatInt(lc.Reset, 10))
	if lc.Reached {
		wait := int64(math.Ceil(time.Until(time.Unix(lc.Reset, 0)).Seconds()))
		if wait < 1 {
			wait = 1
		}
		return &Error{
			Status:  fiber.StatusTooManyRequests,
			Detail:  "rate limit exceeded: " + strconv.FormatInt(lc.Limit, 10) + " requests per window; retry after " + strconv.FormatInt(wait, 10) + " s",
			Headers: map[string]string{"Retry-After": strconv.FormatInt(wait, 10)},
		}
	}
	return nil
}
