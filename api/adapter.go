package api

// What another adapter over the same rules and storage (the dashboard,
// package web, mounted on App after New) uses of the API beyond its
// operations (operation.go): the API's request deadline and log fields,
// its database outage answers, its per-IP budget and password check, and
// the account state cache its keys use.

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
)

// Deadline bounds each request to d, as every API route is.
func Deadline(d time.Duration) fiber.Handler { return deadline(d) }

// RequestID is the request's id (X-Request-Id), as the request log has it.
func RequestID(c *fiber.Ctx) string { return requestID(c) }

// SetRouteLabel names the request's route in the metrics when Fiber's route
// path would not (the dashboard labels all its pages "/").
func SetRouteLabel(c *fiber.Ctx, label string) { c.Locals(routeLabelKey, label) }

// WriteResponse answers c with resp as an operation's route would (its
// headers, status and JSON body).
func WriteResponse(c *fiber.Ctx, status int, resp any) error { return writeResponse(c, status, resp) }

// Unauthorized is the API's 401 with its WWW-Authenticate header.
func Unauthorized(detail string) *Error { return unauthorized(detail) }

// DatabaseOutage returns the 503 err calls for when it means the database
// is unreachable or too slow, recording the outage (logged once for the
// whole server); nil for any other error.
func (s *Server) DatabaseOutage(c *fiber.Ctx, err error) *Error { return s.outage.unavailable(c, err) }

// ChargeClientIP charges one request to the client IP's budget of the
// public routes (POST /api/accounts shares it); 429 when it is spent.
func (s *Server) ChargeClientIP(c *fiber.Ctx) error {
	return s.router.guard.chargeWith(c, s.router.guard.limiter, "ip:"+c.IP())
}

// SignedIn is the outcome of a right password.
type SignedIn = signedIn

// CheckPassword is every password check (the token route's password grant
// and the dashboard's sign-in), charging the account's failure budget
// (internal/signin) first. device is the client's known-device token (""
// for none); remember asks for one to keep.
func (s *Server) CheckPassword(ctx context.Context, email, plain, device string, remember bool) (SignedIn, error) {
	return s.checkPassword(ctx, email, plain, device, remember)
}

// AccountState reads an account's suspension and deletion from the cache
// API keys and data-API tokens use (accounts.CacheTTL);
// accounts.ErrNotFound when it is gone.
func (s *Server) AccountState(ctx context.Context, account uuid.UUID) (accounts.State, error) {
	return s.accountStates.Get(ctx, s.db, account)
}

// DeviceCookie names a browser that gave an account's right password
// recently (internal/signin): its failures have a budget of their own, so
// guessing from elsewhere never holds the owner out. The dashboard's
// sign-in sets it; the token route's password grant reads it too.
const DeviceCookie = "mw_device"

const deviceCookie = DeviceCookie
