package web

import (
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Deps is what the dashboard needs beside the API server it adapts.
type Deps struct {
	// DB holds the sessions (web_sessions); the API's database.
	DB dbutil.Executor
	// PublicBaseURL is the scheme://host[:port] browsers use; an https one
	// marks the cookies Secure and is an accepted Origin.
	PublicBaseURL string
	// SignInStore keeps the failed sign-in counts per client IP and the
	// per-account request budget; this process's memory when nil.
	SignInStore limiter.Store
	// RequestTimeout bounds each page and action; 30 seconds when zero.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	Now            func() time.Time
}

// DepsFrom takes the dashboard's dependencies from the API's, so that both
// share the database, clock, log and limits; signIn is the store of its
// sign-in and request budgets (nil: this process's memory).
func DepsFrom(d api.Deps, signIn limiter.Store) Deps {
	return Deps{DB: d.DB, PublicBaseURL: d.PublicBaseURL, SignInStore: signIn,
		RequestTimeout: d.RequestTimeout, Logger: d.Logger, Now: d.Now}
}

// Dashboard is the mounted dashboard.
type Dashboard struct {
	api   *api.Server
	ops   *api.Ops
	app   *fiber.App
	deps  Deps
	q     *dbsqlc.Queries
	pages map[string]*template.Template
	// ipFails counts failed sign-ins per client IP.
	ipFails *limiter.Limiter
	// requests bounds a signed-in account's dashboard requests, as the
	// per-key limit bounds the API's (RequestsPerMinute).
	requests *limiter.Limiter
	routes   []api.RouteInfo
}

// RequestsPerMinute is how many session requests (pages, actions, feeds)
// one account may make per minute: a person clicking, a live events page
// polling and a receiver long-poll stay far below it; a script driving the
// dashboard does not.
const RequestsPerMinute = 300

// Mount adds the dashboard's routes to srv's app. Mount it after api.New
// has registered the API's: the dashboard owns "/" and "/static/*".
func Mount(srv *api.Server, deps Deps) *Dashboard {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.RequestTimeout == 0 {
		deps.RequestTimeout = 30 * time.Second
	}
	h := &Dashboard{api: srv, ops: srv.Ops(), app: srv.App(), deps: deps, q: dbsqlc.New(), pages: parsePages()}
	store := deps.SignInStore
	if store == nil {
		store = memory.NewStore()
	}
	h.ipFails = limiter.New(store, limiter.Rate{Period: signInFailureWindow, Limit: signInFailuresPerIP})
	h.requests = limiter.New(store, limiter.Rate{Period: time.Minute, Limit: RequestsPerMinute})
	h.addRoutes()
	return h
}

// Routes lists the dashboard's routes (not in /openapi.json on purpose).
func (h *Dashboard) Routes() []api.RouteInfo { return append([]api.RouteInfo(nil), h.routes...) }

func (h *Dashboard) webAdd(method, path string, handlers ...fiber.Handler) {
	h.app.Add(method, path, handlers...)
	h.routes = append(h.routes, api.RouteInfo{Method: method, Path: path})
}

func (h *Dashboard) addRoutes() {
	dl := api.Deadline(h.deps.RequestTimeout)
	page := func(fn fiber.Handler) []fiber.Handler {
		return []fiber.Handler{dl, h.webHeaders, h.webRequireSession(true), fn}
	}
	action := func(fn fiber.Handler) []fiber.Handler {
		return []fiber.Handler{dl, h.webHeaders, h.webRequireSession(false), h.webCheckCSRF, fn}
	}
	feed := func(fn fiber.Handler) []fiber.Handler {
		return []fiber.Handler{h.webHeaders, h.webRequireSession(false), fn}
	}

	// The route's path is the whole /static/..., which is also where the
	// files sit in Files.
	h.webAdd("GET", "/static/*", h.webHeaders, filesystem.New(filesystem.Config{Root: http.FS(Files), MaxAge: 300}))
	h.webAdd("GET", "/signin", dl, h.webHeaders, h.webSignInPage)
	h.webAdd("POST", "/signin", dl, h.webHeaders, h.webSignIn)
	h.webAdd("GET", "/signup", dl, h.webHeaders, h.webSignUpPage)
	h.webAdd("POST", "/signup", dl, h.webHeaders, h.webSignUp)
	// Sign-out admits a suspended account's session too.
	// The verification mail's link: no session needed, the token is the proof.
	h.webAdd("GET", "/notifications/verify", dl, h.webHeaders, h.webVerifyPage)
	h.webAdd("POST", "/notifications/verify", dl, h.webHeaders, h.webVerify)
	h.webAdd("POST", "/signout", dl, h.webHeaders, h.webAnySession, h.webCheckCSRF, h.webSignOut)

	h.webAdd("GET", "/", page(h.webOverview)...)
	h.webAdd("GET", "/domains", page(h.webDomains)...)
	h.webAdd("POST", "/domains", action(h.webCreateDomain)...)
	h.webAdd("GET", "/domains/:domain", page(h.webDomain)...)
	h.webAdd("POST", "/domains/:domain/recommendations/:id/apply", action(h.webApplyRecommendation)...)
	h.webAdd("POST", "/domains/:domain/recommendations/:id/dismiss", action(h.webDismissRecommendation)...)
	h.webAdd("POST", "/domains/:domain/check", action(h.webCheckDomain)...)
	h.webAdd("POST", "/domains/:domain/edit", action(h.webEditDomain)...)
	h.webAdd("POST", "/domains/:domain/delete", action(h.webDeleteDomain)...)
	h.webAdd("POST", "/domains/:domain/pins", action(h.webAddPin)...)
	h.webAdd("POST", "/domains/:domain/pins/remove", action(h.webRemovePin)...)
	h.webAdd("GET", "/alerts", page(h.webAlerts)...)
	h.webAdd("POST", "/alerts/:id/acknowledge", action(h.webAcknowledge)...)
	h.webAdd("POST", "/alerts/:id/withdraw", action(h.webWithdraw)...)
	h.webAdd("GET", "/events", page(h.webEvents)...)
	h.webAdd("GET", "/ui/events", append([]fiber.Handler{dl}, feed(h.webEventsFeed)...)...)
	h.webAdd("GET", "/subscriptions", page(h.webSubscriptions)...)
	h.webAdd("POST", "/subscriptions", action(h.webCreateSubscription)...)
	h.webAdd("POST", "/subscriptions/:id/test", action(h.webTestSubscription)...)
	h.webAdd("POST", "/subscriptions/:id/enabled", action(h.webEnableSubscription)...)
	h.webAdd("POST", "/subscriptions/:id/delete", action(h.webDeleteSubscription)...)
	h.webAdd("POST", "/subscriptions/:id/rotate", action(h.webRotateSecret)...)
	h.webAdd("POST", "/subscriptions/:id/recover", action(h.webRecoverSubscription)...)
	h.webAdd("GET", "/deliveries", page(h.webDeliveries)...)
	h.webAdd("GET", "/deliveries/:id", page(h.webDelivery)...)
	h.webAdd("POST", "/deliveries/:id/retry", action(h.webRetryDelivery)...)
	h.webAdd("GET", "/receivers", page(h.webReceivers)...)
	h.webAdd("POST", "/receivers", action(h.webCreateReceiver)...)
	h.webAdd("GET", "/receivers/:id", page(h.webReceiver)...)
	h.webAdd("GET", "/receivers/:id/messages/:message_id", page(h.webMessage)...)
	h.webAdd("GET", "/ui/receivers/:id/wait", feed(h.webWaitFeed)...)
	h.webAdd("GET", "/dns-connections", page(h.webDNSConnections)...)
	h.webAdd("POST", "/dns-connections", action(h.webCreateDNSConnection)...)
	h.webAdd("POST", "/dns-connections/:id/delete", action(h.webDeleteDNSConnection)...)
	h.webAdd("POST", "/dns-connections/:id/links", action(h.webLinkDNSConnection(true))...)
	h.webAdd("POST", "/dns-connections/:id/links/remove", action(h.webLinkDNSConnection(false))...)
	h.webAdd("GET", "/providers", page(h.webProviders)...)
	h.webAdd("POST", "/providers", action(h.webCreateProvider)...)
	h.webAdd("POST", "/providers/:id/delete", action(h.webDeleteProvider)...)
	h.webAdd("POST", "/providers/:id/links", action(h.webLinkProvider(true))...)
	h.webAdd("POST", "/providers/:id/links/remove", action(h.webLinkProvider(false))...)
	h.webAdd("POST", "/suppressions", action(h.webAddSuppression)...)
	h.webAdd("POST", "/suppressions/remove", action(h.webRemoveSuppression)...)
	h.webAdd("GET", "/settings", page(h.webSettings)...)
	h.webAdd("POST", "/settings/api-keys", action(h.webCreateAPIKey)...)
	h.webAdd("POST", "/settings/api-keys/:id/revoke", action(h.webRevokeAPIKey)...)
	h.webAdd("POST", "/settings/preferences/mutes", action(h.webSetMutes)...)
	h.webAdd("POST", "/settings/preferences/groups", action(h.webSetGroups)...)
	h.webAdd("POST", "/settings/weekly-digest", action(h.webSetWeekly)...)
	h.webAdd("POST", "/settings/notification-addresses", action(h.webAddAddress)...)
	h.webAdd("POST", "/settings/channels", action(h.webCreateChannel)...)
	h.webAdd("POST", "/settings/channels/:id/test", action(h.webTestChannel)...)
	h.webAdd("POST", "/settings/channels/:id/delete", action(h.webDeleteChannel)...)
	h.webAdd("POST", "/settings/notification-addresses/:id/remove", action(h.webRemoveAddress)...)
	h.webAdd("POST", "/settings/notification-addresses/:id/resend", action(h.webResendAddress)...)
}

// webHeaders sets what every dashboard answer carries: no caching of
// account data, no framing, a strict content security policy (scripts and
// styles only from /static), and the route label the metrics use for "/".
func (h *Dashboard) webHeaders(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	api.SetRouteLabel(c, "/")
	return c.Next()
}
