package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

const (
	sessionCookie = "mw_session"
	// preCSRFCookie carries the double-submit token of the sign-in and
	// sign-up forms, which are posted before any session exists.
	preCSRFCookie = "mw_csrf"
	flashCookie   = "mw_flash"
	// SessionTTL is how long a session lives without use; each use (at most
	// once a minute) pushes its expiry this far again.
	SessionTTL = 7 * 24 * time.Hour
	// DashboardKeyIdentifier stands for the API key in what the dashboard
	// records (an acknowledgement's key_identifier): the action came from a
	// signed-in person, not from a key.
	DashboardKeyIdentifier = "dashboard"

	// Failed sign-ins per client IP; per account, internal/signin.
	signInFailuresPerIP = 20
	signInFailureWindow = 15 * time.Minute
)

// webSession is the signed-in person of a request.
type webSession struct {
	ID      uuid.UUID
	Account uuid.UUID
	Email   string
	IsAdmin bool
	CSRF    string
	// Suspended is the suspension's detail while the account is suspended:
	// the session stays (the person can read why and sign out) but every
	// page and action answers 403 with it.
	Suspended string
}

type webLocalKey int

const webSessionKey webLocalKey = iota

func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// csrfFor derives a session's synchronizer token from its secret token: only
// the holder of the session cookie can know it, and it needs no storage.
func csrfFor(sessionToken string) string {
	m := hmac.New(sha256.New, []byte(sessionToken))
	m.Write([]byte("mailwatch dashboard csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Dashboard) webSecure(c *fiber.Ctx) bool {
	return c.Protocol() == "https" || strings.HasPrefix(strings.ToLower(h.deps.PublicBaseURL), "https://")
}

func (h *Dashboard) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	ck := &fiber.Cookie{Name: name, Value: value, Path: "/", HTTPOnly: true, Secure: h.webSecure(c), SameSite: fiber.CookieSameSiteLaxMode}
	if expires.IsZero() {
		ck.SessionOnly = true
	} else {
		ck.Expires = expires
	}
	c.Cookie(ck)
}

func (h *Dashboard) clearCookie(c *fiber.Ctx, name string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", HTTPOnly: true, Secure: h.webSecure(c),
		SameSite: fiber.CookieSameSiteLaxMode, Expires: time.Unix(1, 0)})
}

// startSession stores a new session of the account and sets its cookie.
func (h *Dashboard) startSession(c *fiber.Ctx, account uuid.UUID, email string, isAdmin bool) error {
	ctx := c.UserContext()
	token := newToken()
	expires := h.deps.Now().Add(SessionTTL)
	if _, err := h.q.WebSessionDeleteExpired(ctx, h.deps.DB); err != nil {
		return err
	}
	row, err := h.q.WebSessionInsert(ctx, h.deps.DB, dbsqlc.WebSessionInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, TokenHash: tokenHash(token), ExpiresAt: expires,
	})
	if err != nil {
		return err
	}
	h.setCookie(c, sessionCookie, token, expires)
	h.clearCookie(c, preCSRFCookie)
	c.Locals(webSessionKey, &webSession{ID: row.ID, Account: account, Email: email, IsAdmin: isAdmin, CSRF: csrfFor(token)})
	return nil
}

// session reads the request's session; nil when there is none.
func (h *Dashboard) session(c *fiber.Ctx) (*webSession, error) {
	if ws, ok := c.Locals(webSessionKey).(*webSession); ok {
		return ws, nil
	}
	token := c.Cookies(sessionCookie)
	if token == "" || len(token) > 100 {
		return nil, nil
	}
	token = strings.Clone(token)
	row, err := h.q.WebSessionGet(c.UserContext(), h.deps.DB, tokenHash(token))
	if dbutil.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The account's state comes from the same per-replica cache the API
	// keys and data-API tokens use (accounts.CacheTTL): an account being
	// deleted or gone signs its sessions out; a suspended one keeps them
	// but is refused (webRequireSession).
	st, err := h.api.AccountState(c.UserContext(), row.AccountID)
	if errors.Is(err, accounts.ErrNotFound) || (err == nil && st.Deleting()) {
		h.clearCookie(c, sessionCookie)
		return nil, nil
	}
	if err != nil {
		return nil, &api.Error{Status: http.StatusServiceUnavailable, Detail: "sign-in is temporarily unavailable", Cause: err}
	}
	now := h.deps.Now()
	if now.Sub(row.LastSeenAt) > time.Minute {
		expires := now.Add(SessionTTL)
		if err := h.q.WebSessionTouch(c.UserContext(), h.deps.DB, dbsqlc.WebSessionTouchParams{ID: row.ID, ExpiresAt: expires}); err != nil {
			return nil, err
		}
		h.setCookie(c, sessionCookie, token, expires)
	}
	ws := &webSession{ID: row.ID, Account: row.AccountID, Email: row.Email, IsAdmin: row.IsAdmin, CSRF: csrfFor(token)}
	if st.Suspended() {
		ws.Suspended = st.SuspendedDetail()
	}
	c.Locals(webSessionKey, ws)
	return ws, nil
}

// webRequireSession admits signed-in requests, with the session's account
// as the Caller every endpoint function reads. Pages send others to the
// sign-in page; actions and feeds answer 401. A suspended account's
// session gets 403 with the suspension's detail (a page for pages).
func (h *Dashboard) webRequireSession(isPage bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ws, err := h.session(c)
		if err != nil {
			if isPage {
				return h.pageError(c, err)
			}
			return err
		}
		if ws == nil {
			if isPage {
				return c.Redirect("/signin?next="+url.QueryEscape(string(c.Request().URI().RequestURI())), http.StatusSeeOther)
			}
			return api.Unauthorized("sign in first")
		}
		if ws.Suspended != "" {
			if isPage {
				return h.render(c, http.StatusForbidden, "error", "Account suspended", nil, ws.Suspended)
			}
			return &api.Error{Status: http.StatusForbidden, Detail: ws.Suspended}
		}
		if over, retry := throttledRequest(c.UserContext(), h.requests, "web:"+ws.Account.String()); over {
			secs := strconv.FormatInt(retry, 10)
			c.Set(fiber.HeaderRetryAfter, secs)
			return &api.Error{Status: http.StatusTooManyRequests, Detail: "too many dashboard requests for this account; retry in " + secs + " seconds"}
		}
		// The operations get the caller as a parameter (callerOf); the
		// request log reads it from the context, as for an API key.
		c.SetUserContext(api.WithCaller(c.UserContext(), callerOf(c)))
		return c.Next()
	}
}

// webAnySession admits any live session, a suspended account's too (for
// signing out).
func (h *Dashboard) webAnySession(c *fiber.Ctx) error {
	ws, err := h.session(c)
	if err != nil {
		return err
	}
	if ws == nil {
		return api.Unauthorized("sign in first")
	}
	return c.Next()
}
