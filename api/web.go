package api

// The web dashboard: server-rendered pages at / for people, next to the REST
// API for programs. Sign-in makes a server-side session (schema 0016); every
// page and action builds a Caller from the session and calls the REST
// endpoints' own functions through invoke (endpoint.go), so that a rule of
// the API has no second implementation here.
//
// The dashboard's routes are deliberately not in /openapi.json: they answer
// HTML (and two JSON feeds for the pages' own scripts) to a browser holding a
// session cookie, not to an API key, and their shape may change with the
// pages. WebRoutes lists them so the OpenAPI test can tell them apart.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	"github.com/google/uuid"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/signin"
	"github.com/mailwatch/mailwatch/web"
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

	// deviceCookie names a browser that gave an account's right password
	// recently (internal/signin): its failures have a budget of their own,
	// so guessing from elsewhere never holds the owner out.
	deviceCookie = "mw_device"

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

// webState is the dashboard's part of the server.
type webState struct {
	pages   map[string]*template.Template
	ipFails *limiter.Limiter
	// requests bounds a signed-in account's dashboard requests, as the
	// per-key limit bounds the API's (WebRequestsPerMinute).
	requests *limiter.Limiter
	routes   []RouteInfo
}

// WebRequestsPerMinute is how many session requests (pages, actions,
// feeds) one account may make per minute: a person clicking, a live events
// page polling and a receiver long-poll stay far below it; a script driving
// the dashboard does not.
const WebRequestsPerMinute = 300

// WebRoutes lists the dashboard's routes (not in /openapi.json on purpose).
func (s *Server) WebRoutes() []RouteInfo { return append([]RouteInfo(nil), s.web.routes...) }

func (s *Server) webAdd(method, path string, handlers ...fiber.Handler) {
	s.app.Add(method, path, handlers...)
	s.web.routes = append(s.web.routes, RouteInfo{Method: method, Path: path})
}

func (s *Server) webRoutes() {
	s.web.pages = parsePages()
	store := s.deps.SignInStore
	if store == nil {
		store = memory.NewStore()
	}
	rate := limiter.Rate{Period: signInFailureWindow, Limit: signInFailuresPerIP}
	s.web.ipFails = limiter.New(store, rate)
	s.web.requests = limiter.New(store, limiter.Rate{Period: time.Minute, Limit: WebRequestsPerMinute})

	dl := deadline(s.deps.RequestTimeout)
	page := func(h fiber.Handler) []fiber.Handler {
		return []fiber.Handler{dl, s.webHeaders, s.webRequireSession(true), h}
	}
	action := func(h fiber.Handler) []fiber.Handler {
		return []fiber.Handler{dl, s.webHeaders, s.webRequireSession(false), s.webCheckCSRF, h}
	}
	feed := func(h fiber.Handler) []fiber.Handler {
		return []fiber.Handler{s.webHeaders, s.webRequireSession(false), h}
	}

	// The route's path is the whole /static/..., which is also where the
	// files sit in web.Files.
	s.webAdd("GET", "/static/*", s.webHeaders, filesystem.New(filesystem.Config{Root: http.FS(web.Files), MaxAge: 300}))
	s.webAdd("GET", "/signin", dl, s.webHeaders, s.webSignInPage)
	s.webAdd("POST", "/signin", dl, s.webHeaders, s.webSignIn)
	s.webAdd("GET", "/signup", dl, s.webHeaders, s.webSignUpPage)
	s.webAdd("POST", "/signup", dl, s.webHeaders, s.webSignUp)
	// Sign-out admits a suspended account's session too.
	// The verification mail's link: no session needed, the token is the proof.
	s.webAdd("GET", "/notifications/verify", dl, s.webHeaders, s.webVerifyPage)
	s.webAdd("POST", "/notifications/verify", dl, s.webHeaders, s.webVerify)
	s.webAdd("POST", "/signout", dl, s.webHeaders, s.webAnySession, s.webCheckCSRF, s.webSignOut)

	s.webAdd("GET", "/", page(s.webOverview)...)
	s.webAdd("GET", "/domains", page(s.webDomains)...)
	s.webAdd("POST", "/domains", action(s.webCreateDomain)...)
	s.webAdd("GET", "/domains/:domain", page(s.webDomain)...)
	s.webAdd("POST", "/domains/:domain/recommendations/:id/apply", action(s.webApplyRecommendation)...)
	s.webAdd("POST", "/domains/:domain/recommendations/:id/dismiss", action(s.webDismissRecommendation)...)
	s.webAdd("GET", "/alerts", page(s.webAlerts)...)
	s.webAdd("POST", "/alerts/:id/acknowledge", action(s.webAcknowledge)...)
	s.webAdd("POST", "/alerts/:id/withdraw", action(s.webWithdraw)...)
	s.webAdd("GET", "/events", page(s.webEvents)...)
	s.webAdd("GET", "/ui/events", append([]fiber.Handler{dl}, feed(s.webEventsFeed)...)...)
	s.webAdd("GET", "/subscriptions", page(s.webSubscriptions)...)
	s.webAdd("POST", "/subscriptions", action(s.webCreateSubscription)...)
	s.webAdd("POST", "/subscriptions/:id/test", action(s.webTestSubscription)...)
	s.webAdd("POST", "/subscriptions/:id/enabled", action(s.webEnableSubscription)...)
	s.webAdd("GET", "/deliveries", page(s.webDeliveries)...)
	s.webAdd("GET", "/deliveries/:id", page(s.webDelivery)...)
	s.webAdd("POST", "/deliveries/:id/retry", action(s.webRetryDelivery)...)
	s.webAdd("GET", "/receivers", page(s.webReceivers)...)
	s.webAdd("POST", "/receivers", action(s.webCreateReceiver)...)
	s.webAdd("GET", "/receivers/:id", page(s.webReceiver)...)
	s.webAdd("GET", "/receivers/:id/messages/:message_id", page(s.webMessage)...)
	s.webAdd("GET", "/ui/receivers/:id/wait", feed(s.webWaitFeed)...)
	s.webAdd("GET", "/dns-connections", page(s.webDNSConnections)...)
	s.webAdd("POST", "/dns-connections", action(s.webCreateDNSConnection)...)
	s.webAdd("POST", "/dns-connections/:id/delete", action(s.webDeleteDNSConnection)...)
	s.webAdd("POST", "/dns-connections/:id/links", action(s.webLinkDNSConnection(true))...)
	s.webAdd("POST", "/dns-connections/:id/links/remove", action(s.webLinkDNSConnection(false))...)
	s.webAdd("GET", "/providers", page(s.webProviders)...)
	s.webAdd("POST", "/providers", action(s.webCreateProvider)...)
	s.webAdd("POST", "/providers/:id/delete", action(s.webDeleteProvider)...)
	s.webAdd("POST", "/providers/:id/links", action(s.webLinkProvider(true))...)
	s.webAdd("POST", "/providers/:id/links/remove", action(s.webLinkProvider(false))...)
	s.webAdd("POST", "/suppressions", action(s.webAddSuppression)...)
	s.webAdd("POST", "/suppressions/remove", action(s.webRemoveSuppression)...)
	s.webAdd("GET", "/settings", page(s.webSettings)...)
	s.webAdd("POST", "/settings/api-keys", action(s.webCreateAPIKey)...)
	s.webAdd("POST", "/settings/api-keys/:id/revoke", action(s.webRevokeAPIKey)...)
	s.webAdd("POST", "/settings/preferences/mutes", action(s.webSetMutes)...)
	s.webAdd("POST", "/settings/preferences/groups/:group", action(s.webSetGroup)...)
	s.webAdd("POST", "/settings/notification-addresses", action(s.webAddAddress)...)
	s.webAdd("POST", "/settings/notification-addresses/:id/remove", action(s.webRemoveAddress)...)
	s.webAdd("POST", "/settings/notification-addresses/:id/resend", action(s.webResendAddress)...)
}

// webHeaders sets what every dashboard answer carries: no caching of
// account data, no framing, a strict content security policy (scripts and
// styles only from /static), and the route label the metrics use for "/".
func (s *Server) webHeaders(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	c.Locals(routeLabelKey, "/")
	return c.Next()
}

// ---- sessions ----

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

func (s *Server) webSecure(c *fiber.Ctx) bool {
	return c.Protocol() == "https" || strings.HasPrefix(strings.ToLower(s.deps.PublicBaseURL), "https://")
}

func (s *Server) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	ck := &fiber.Cookie{Name: name, Value: value, Path: "/", HTTPOnly: true, Secure: s.webSecure(c), SameSite: fiber.CookieSameSiteLaxMode}
	if expires.IsZero() {
		ck.SessionOnly = true
	} else {
		ck.Expires = expires
	}
	c.Cookie(ck)
}

func (s *Server) clearCookie(c *fiber.Ctx, name string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", HTTPOnly: true, Secure: s.webSecure(c),
		SameSite: fiber.CookieSameSiteLaxMode, Expires: time.Unix(1, 0)})
}

// startSession stores a new session of the account and sets its cookie.
func (s *Server) startSession(c *fiber.Ctx, account uuid.UUID, email string, isAdmin bool) error {
	ctx := c.UserContext()
	token := newToken()
	expires := s.now().Add(SessionTTL)
	if _, err := s.q.WebSessionDeleteExpired(ctx, s.db); err != nil {
		return err
	}
	row, err := s.q.WebSessionInsert(ctx, s.db, dbsqlc.WebSessionInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, TokenHash: tokenHash(token), ExpiresAt: expires,
	})
	if err != nil {
		return err
	}
	s.setCookie(c, sessionCookie, token, expires)
	s.clearCookie(c, preCSRFCookie)
	c.Locals(webSessionKey, &webSession{ID: row.ID, Account: account, Email: email, IsAdmin: isAdmin, CSRF: csrfFor(token)})
	return nil
}

// EndWebSessions signs the account out of the dashboard everywhere (on a
// password change, say). db may be the transaction making the change.
func (s *Server) EndWebSessions(ctx context.Context, db dbsqlc.DBTX, account uuid.UUID) (int64, error) {
	return s.q.WebSessionDeleteByAccount(ctx, db, account)
}

// session reads the request's session; nil when there is none.
func (s *Server) session(c *fiber.Ctx) (*webSession, error) {
	if ws, ok := c.Locals(webSessionKey).(*webSession); ok {
		return ws, nil
	}
	token := c.Cookies(sessionCookie)
	if token == "" || len(token) > 100 {
		return nil, nil
	}
	token = strings.Clone(token)
	row, err := s.q.WebSessionGet(c.UserContext(), s.db, tokenHash(token))
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
	st, err := s.accountStates.Get(c.UserContext(), s.db, row.AccountID)
	if errors.Is(err, accounts.ErrNotFound) || (err == nil && st.Deleting()) {
		s.clearCookie(c, sessionCookie)
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, Detail: "sign-in is temporarily unavailable", Cause: err}
	}
	now := s.now()
	if now.Sub(row.LastSeenAt) > time.Minute {
		expires := now.Add(SessionTTL)
		if err := s.q.WebSessionTouch(c.UserContext(), s.db, dbsqlc.WebSessionTouchParams{ID: row.ID, ExpiresAt: expires}); err != nil {
			return nil, err
		}
		s.setCookie(c, sessionCookie, token, expires)
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
func (s *Server) webRequireSession(isPage bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ws, err := s.session(c)
		if err != nil {
			if isPage {
				return s.pageError(c, err)
			}
			return err
		}
		if ws == nil {
			if isPage {
				return c.Redirect("/signin?next="+url.QueryEscape(string(c.Request().URI().RequestURI())), http.StatusSeeOther)
			}
			return unauthorized("sign in first")
		}
		if ws.Suspended != "" {
			if isPage {
				return s.render(c, http.StatusForbidden, "error", "Account suspended", nil, ws.Suspended)
			}
			return &Error{Status: http.StatusForbidden, Detail: ws.Suspended}
		}
		if over, retry := throttledRequest(c.UserContext(), s.web.requests, "web:"+ws.Account.String()); over {
			secs := strconv.FormatInt(retry, 10)
			c.Set(fiber.HeaderRetryAfter, secs)
			return &Error{Status: http.StatusTooManyRequests, Detail: "too many dashboard requests for this account; retry in " + secs + " seconds"}
		}
		c.SetUserContext(WithCaller(c.UserContext(), Caller{AccountID: ws.Account, KeyIdentifier: DashboardKeyIdentifier, IsAdmin: ws.IsAdmin}))
		return c.Next()
	}
}

// webAnySession admits any live session, a suspended account's too (for
// signing out).
func (s *Server) webAnySession(c *fiber.Ctx) error {
	ws, err := s.session(c)
	if err != nil {
		return err
	}
	if ws == nil {
		return unauthorized("sign in first")
	}
	return c.Next()
}

// sameOrigin refuses requests a browser marks as coming from another site:
// Sec-Fetch-Site other than same-origin, or an Origin other than ours.
// Clients that send neither (curl) rely on the token alone.
func (s *Server) sameOrigin(c *fiber.Ctx) bool {
	if site := c.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return true
	}
	if strings.EqualFold(origin, c.Protocol()+"://"+c.Hostname()) {
		return true
	}
	if base := strings.TrimRight(s.deps.PublicBaseURL, "/"); base != "" {
		if u, err := url.Parse(base); err == nil && strings.EqualFold(origin, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

func tokensEqual(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

var errCSRF = &Error{Status: http.StatusForbidden, Detail: "cross-site request refused: reload the page and try again"}

// webCheckCSRF guards every state-changing dashboard request: the form field
// csrf (or the X-CSRF-Token header of a script's request) must be the
// session's token, and the request must come from our own origin.
func (s *Server) webCheckCSRF(c *fiber.Ctx) error {
	ws := c.Locals(webSessionKey).(*webSession)
	got := c.Get("X-CSRF-Token")
	if got == "" {
		got = c.FormValue("csrf")
	}
	if !s.sameOrigin(c) || !tokensEqual(got, ws.CSRF) {
		return errCSRF
	}
	return c.Next()
}

// preCSRF returns the double-submit token of the sign-in forms, setting its
// cookie when the browser has none.
func (s *Server) preCSRF(c *fiber.Ctx) string {
	if t := c.Cookies(preCSRFCookie); len(t) == 43 {
		return strings.Clone(t)
	}
	t := newToken()
	s.setCookie(c, preCSRFCookie, t, time.Time{})
	return t
}

func (s *Server) checkPreCSRF(c *fiber.Ctx) error {
	if !s.sameOrigin(c) || !tokensEqual(c.FormValue("csrf"), c.Cookies(preCSRFCookie)) {
		return errCSRF
	}
	return nil
}

// ---- rendering ----

// webPage is what every template gets.
type webPage struct {
	Title   string
	Nav     string
	Session *webSession
	CSRF    string
	Notice  string
	Problem string
	Data    any
}

func (s *Server) render(c *fiber.Ctx, status int, name, title string, data any, problem string) error {
	p := webPage{Title: title, Nav: name, Data: data, Problem: problem}
	if ws, ok := c.Locals(webSessionKey).(*webSession); ok {
		p.Session, p.CSRF = ws, ws.CSRF
	} else {
		p.CSRF = s.preCSRF(c)
	}
	if f := c.Cookies(flashCookie); f != "" {
		if kind, msg, ok := strings.Cut(f, ":"); ok {
			if m, err := url.QueryUnescape(msg); err == nil {
				if kind == "err" {
					if p.Problem == "" {
						p.Problem = m
					}
				} else {
					p.Notice = m
				}
			}
		}
		s.clearCookie(c, flashCookie)
	}
	t, ok := s.web.pages[name]
	if !ok {
		return errors.New("web: no template " + name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(buf.Bytes())
}

// problemText is what the page shows of an error: an API error's detail and
// field messages; for anything else (a 5xx) a fixed text with the request id,
// the cause going to the log only.
func (s *Server) problemText(c *fiber.Ctx, err error) (int, string) {
	var e *Error
	if errors.As(err, &e) && e.Status < 500 {
		msg := e.Detail
		for _, f := range e.Fields {
			msg += "; " + f.Field + ": " + f.Message
		}
		return e.Status, msg
	}
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		return e.Status, e.Detail
	}
	if e := s.outage.unavailable(c, err); e != nil {
		// The database is down or frozen: a 503 the browser may retry,
		// logged once by the outage, not per page.
		for k, v := range e.Headers {
			c.Set(k, v)
		}
		return e.Status, e.Detail
	}
	s.logger.ErrorContext(c.UserContext(), "dashboard action failed", slog.String("request_id", requestID(c)), slog.Any("error", err))
	return http.StatusInternalServerError, "something went wrong on our side (request " + requestID(c) + "); try again"
}

// done ends an action: back to the page at to, with its outcome shown once.
func (s *Server) done(c *fiber.Ctx, to string, err error, notice string) error {
	v := "ok:" + url.QueryEscape(notice)
	if err != nil {
		_, msg := s.problemText(c, err)
		v = "err:" + url.QueryEscape(msg)
	}
	if len(v) > 1500 {
		v = v[:1500]
	}
	s.setCookie(c, flashCookie, v, time.Time{})
	return c.Redirect(localRedirect(to), http.StatusSeeOther)
}

// pageError renders a page that could not be built (a 404 domain, ...).
func (s *Server) pageError(c *fiber.Ctx, err error) error {
	status, msg := s.problemText(c, err)
	return s.render(c, status, "error", "Problem", nil, msg)
}

// ---- sign-in and sign-up ----

type signInData struct {
	Email string
	Next  string
}

// maxRedirectLen bounds a redirect target; a longer one becomes "/".
const maxRedirectLen = 2048

// localRedirect is the only gate of the dashboard's redirect targets (the
// sign-in's next, an action's way back): raw is kept when it is a path on
// this site, else "/". Browsers drop tabs and newlines from a URL, read a
// backslash as a slash and "//host" as another site, so only printable
// ASCII other than space and backslash is accepted (anything else must come
// percent-encoded), the target must parse as a URL with neither scheme nor
// host, and its path, decoded, must start with exactly one slash and hold
// no control character, whitespace or backslash either.
func localRedirect(raw string) string {
	if raw == "" || len(raw) > maxRedirectLen || raw[0] != '/' {
		return "/"
	}
	for i := 0; i < len(raw); i++ {
		if b := raw[i]; b <= ' ' || b >= 0x7f || b == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	for _, r := range u.Path {
		if r <= ' ' || r == 0x7f || r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return "/"
		}
	}
	return raw
}

func (s *Server) webSignInPage(c *fiber.Ctx) error {
	if ws, err := s.session(c); err == nil && ws != nil && ws.Suspended == "" {
		return c.Redirect(localRedirect(c.Query("next")), http.StatusSeeOther)
	}
	return s.render(c, http.StatusOK, "signin", "Sign in", signInData{Next: localRedirect(c.Query("next"))}, "")
}

func (s *Server) webSignUpPage(c *fiber.Ctx) error {
	return s.render(c, http.StatusOK, "signup", "Create an account", signInData{}, "")
}

// throttled says whether key has used up its failed sign-ins, and when it
// may try again.
// throttledRequest charges one request to key and reports whether it is
// over the limit, with the seconds until the window resets. A store that
// cannot be reached does not lock people out.
func throttledRequest(ctx context.Context, lim *limiter.Limiter, key string) (bool, int64) {
	lc, err := lim.Get(ctx, key)
	if err != nil || !lc.Reached {
		return false, 0
	}
	return true, max(lc.Reset-time.Now().Unix(), 1)
}

func throttled(ctx context.Context, lim *limiter.Limiter, key string) (bool, int64) {
	lc, err := lim.Peek(ctx, key)
	if err != nil {
		return false, 0
	}
	if lc.Reached || lc.Remaining <= 0 {
		return true, max(1, lc.Reset-time.Now().Unix())
	}
	return false, 0
}

func (s *Server) webSignIn(c *fiber.Ctx) error {
	if err := s.checkPreCSRF(c); err != nil {
		return s.render(c, http.StatusForbidden, "signin", "Sign in", signInData{}, errCSRF.Detail)
	}
	ctx := c.UserContext()
	email := strings.ToLower(strings.TrimSpace(c.FormValue("email")))
	form := signInData{Email: email, Next: localRedirect(c.FormValue("next"))}
	ipKey := "signin-ip:" + c.IP()
	if limited, wait := throttled(ctx, s.web.ipFails, ipKey); limited {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(wait, 10))
		return s.render(c, http.StatusTooManyRequests, "signin", "Sign in", form,
			"too many failed sign-ins; try again in "+strconv.FormatInt((wait+59)/60, 10)+" minutes")
	}
	// The account's own budget (internal/signin) is checked inside, with
	// this browser's device cookie: token.go's checkPassword.
	in, err := s.checkPassword(ctx, email, c.FormValue("password"), strings.Clone(c.Cookies(deviceCookie)), true)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
			_, _ = s.web.ipFails.Get(ctx, ipKey)
		}
		if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
			for k, v := range e.Headers {
				c.Set(k, v)
			}
		}
		status, msg := s.problemText(c, err)
		return s.render(c, status, "signin", "Sign in", form, msg)
	}
	if in.Device != "" {
		s.setCookie(c, deviceCookie, in.Device, s.now().Add(signin.DeviceTTL))
	}
	if err := s.startSession(c, in.Account, in.Email, false); err != nil {
		return err
	}
	return c.Redirect(form.Next, http.StatusSeeOther)
}

type signUpData struct {
	Email string
	Key   *NewAPIKey
}

func (s *Server) webSignUp(c *fiber.Ctx) error {
	if err := s.checkPreCSRF(c); err != nil {
		return s.render(c, http.StatusForbidden, "signup", "Create an account", signUpData{}, errCSRF.Detail)
	}
	// Account creation costs the client IP's budget, as POST /api/accounts does.
	if err := s.router.guard.chargeWith(c, s.router.guard.limiter, "ip:"+c.IP()); err != nil {
		status, msg := s.problemText(c, err)
		return s.render(c, status, "signup", "Create an account", signUpData{}, msg)
	}
	ctx := c.UserContext()
	req := &CreateAccountRequest{Email: c.FormValue("email"), Password: c.FormValue("password")}
	resp, err := invoke[CreateAccountRequest, CreateAccountResponse](ctx, s.router, "createAccount", req)
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.render(c, status, "signup", "Create an account", signUpData{Email: req.Email}, msg)
	}
	if err := s.startSession(c, resp.Account.ID, resp.Account.Email, resp.Account.IsAdmin); err != nil {
		return err
	}
	// The account's first key is shown here once, like the API's answer.
	return s.render(c, http.StatusCreated, "welcome", "Welcome", signUpData{Email: resp.Account.Email, Key: &resp.APIKey}, "")
}

func (s *Server) webSignOut(c *fiber.Ctx) error {
	if token := c.Cookies(sessionCookie); token != "" {
		if _, err := s.q.WebSessionDelete(c.UserContext(), s.db, tokenHash(token)); err != nil {
			return err
		}
	}
	s.clearCookie(c, sessionCookie)
	return c.Redirect("/signin", http.StatusSeeOther)
}
