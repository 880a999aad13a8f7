// Package api is mailwatch's REST API: a Fiber app whose routes are
// declared as typed endpoints (request struct, response struct, one
// function), documented in OpenAPI from the same declarations.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/ulule/limiter/v3"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/readreplica"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/usage"
)

// Deps is what the API needs from the outside world, grouped by the part
// of the world each capability touches. Logger and Now are defaulted once,
// in New.
type Deps struct {
	StoreDeps
	EventDeps
	HTTPDeps
	IngressDeps
	WebhookDeps
	DNSDeps
	PlanDeps
	AuthDeps

	// Logger receives the API's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// StoreDeps is where the API keeps rows and queues work.
type StoreDeps struct {
	// DB is a pool in production; tests may pass a transaction.
	DB dbutil.Executor
	// Pool, when set, is reported in /metrics.
	Pool *pgxpool.Pool
	// River inserts jobs in the request's transaction (insert-only client).
	River *river.Client[pgx.Tx]
	// Keyring encrypts and decrypts signing secrets at rest.
	Keyring *secretbox.Keyring
	// Replica, when set, serves the read-only routes (the data API's reads
	// and the aggregates) while it is fresh (DATABASE_READ_URL); DB serves
	// them otherwise.
	Replica *readreplica.Router
}

// EventDeps writes and lists events.
type EventDeps struct {
	// Emitter writes events (and their deliveries) in a transaction.
	Emitter *events.Emitter
	// EventPages caches the first page of event listings
	// (EVENTS_PAGE_CACHE_TTL); nil caches nothing.
	EventPages *events.FirstPages
}

// HTTPDeps shapes every request: budgets, limits, proxies and metrics.
type HTTPDeps struct {
	// Limiter holds the per-key and per-IP budgets.
	Limiter *limiter.Limiter
	// IngressLimiter holds the webhook-ingress budgets per client IP
	// (higher than Limiter's); Limiter is used when nil.
	IngressLimiter *limiter.Limiter
	// Usage collects per-key request counts; flushed by its own loop.
	Usage *usage.Tracker
	// RequestTimeout bounds a request (REQUEST_TIMEOUT).
	RequestTimeout time.Duration
	// BodyLimit caps every request body (BODY_LIMIT_BYTES).
	BodyLimit int
	// TrustedProxies are the proxies whose forwarded client IP is believed.
	TrustedProxies []string
	// PublicBaseURL is the scheme://host[:port] clients (Twilio) use to reach
	// the API, for checking signatures behind a proxy; empty means the
	// request's own scheme and host.
	PublicBaseURL string
	// Registry receives the API's metrics; a new one when nil.
	Registry *prometheus.Registry
}

// IngressDeps verifies and bounds what outsiders post: inbound mail and SMS,
// sending providers' and Stripe's webhooks, and the receivers' long polls.
type IngressDeps struct {
	// InboundDomain is the domain of receiver and reporting addresses.
	InboundDomain string
	// InboundWebhookSecret verifies the email ingress webhook.
	InboundWebhookSecret string
	// TwilioAuthToken verifies the SMS ingress webhook.
	TwilioAuthToken string
	// MaxMessageBytes caps a message sent to the email ingress webhook (413
	// beyond); zero means 10 MiB. BodyLimit caps every body first.
	MaxMessageBytes int64
	// Waiters wakes receiver long polls (one LISTEN connection per process;
	// the caller runs it). When nil the API makes a hub without a listener,
	// woken only by writes this process makes (tests on one transaction).
	Waiters *receivers.Hub
	// SNSCerts fetches SNS signing certificates (SES provider ingress):
	// ses.HTTPCertFetcher over the AWS-only, SSRF-guarded client.
	SNSCerts ses.CertFetcher
	// ProviderWebhookMaxAge is PROVIDER_WEBHOOK_MAX_AGE: how old a signed
	// provider webhook timestamp may be; zero turns the check off.
	ProviderWebhookMaxAge time.Duration
	// StripeWebhookSecret verifies the Stripe payment webhook; empty
	// answers it with 503.
	StripeWebhookSecret string
}

// WebhookDeps reaches customers' endpoints (subscription tests, auth provider
// key sets) through the SSRF guard.
type WebhookDeps struct {
	// WebhookGuard checks webhook destinations against SSRF rules.
	WebhookGuard *netguard.Guard
	// WebhookClient sends subscription test pushes.
	WebhookClient *http.Client
	// ChannelHosts is where notification channels may send
	// (CHANNEL_ALLOWED_HOSTS); nil means each kind's built-in hosts.
	ChannelHosts *channels.AllowList
	// DashboardURL is the dashboard's base URL, for links in channel
	// test messages.
	DashboardURL string
}

// DNSDeps answers live domain checks and DNS fixes.
type DNSDeps struct {
	// Resolver answers the domain checks' DNS queries.
	Resolver dnscheck.Resolver
	// MTASTSClient fetches MTA-STS policies in live lookups; nil means
	// dnscheck.NewHTTPClient over Resolver.
	MTASTSClient *http.Client
	// DNSFix holds DNS connections' environment and the MX setup's
	// configuration; nil answers their routes with 503.
	DNSFix *domains.FixDeps
	// SMTPProbe is SMTP_PROBE: when false, POST .../transport/check
	// answers 409 (the workers probe nothing).
	SMTPProbe bool
}

// PlanDeps are the plan settings the API shows and enforces.
type PlanDeps struct {
	// EventRetentionDays is EVENT_RETENTION_DAYS, the cap on every plan's
	// event retention (shown by GET /api/accounts/me/plan); zero: no cap.
	EventRetentionDays int
	// DefaultPlan is DEFAULT_PLAN: the plan of accounts without one of
	// their own; empty is free.
	DefaultPlan string
}

// AuthDeps signs in people and issues and checks data-API tokens.
type AuthDeps struct {
	// Passwords bounds concurrent argon2id hashing; nil means the
	// process-wide password.Process().
	Passwords *password.Limiter
	// Identity issues and verifies data-API tokens; when nil and Keyring is
	// set, New makes one with the defaults (issuer "mailwatch").
	Identity *identity.Issuer
	// DataAPI limits the /rest/v1 data API.
	DataAPI DataAPIOptions
	// DataAPIOnly serves only the data API (`mailwatch data-api`): /rest/v1,
	// token issuance, the JWKS and the operational routes.
	DataAPIOnly bool
}

// Server is the REST API.
type Server struct {
	app    *fiber.App
	router *Router
	deps   Deps
	db     dbutil.Executor
	// reads is where read-only routes run: the replica while it is fresh,
	// else db.
	reads    dbutil.Executor
	q        *dbsqlc.Queries
	logger   *slog.Logger
	metrics  *httpMetrics
	outage   *outageLog // dberrors.go: database outages as 503s, logged once
	now      func() time.Time
	inflight atomic.Int64
	// ingester batches provider webhook payloads into transactions.
	ingester *providers.Ingester
	// providerCache keeps providers' rows and opened configs for ingress.
	providerCache *providers.Cache
	// verifyProviderToken accepts linked identity providers' tokens on the
	// data API (authproviders.go) for the account the request names;
	// handled is false for tokens of our own issuer or none.
	verifyProviderToken func(ctx context.Context, token, ourIssuer, account string) (v *verifiedToken, handled bool, err error)
	// tokens caches verified data-API tokens (dataapi.go).
	tokens verifiedCache
	// accountStates caches accounts' suspension, deletion and credentials
	// changes for token checks (account_state.go).
	accountStates *accounts.Cache
	// ops are the operations the dashboard calls (operation.go).
	ops Ops
	// tokenNulls is where POST /api/auth/token's body may hold null
	// (token.go reads the body itself).
	tokenNulls *nullRule
}

// New builds the API with every route registered.
func New(deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.RequestTimeout == 0 {
		deps.RequestTimeout = 30 * time.Second
	}
	if deps.BodyLimit == 0 {
		deps.BodyLimit = 1 << 20
	}
	if deps.Usage == nil {
		deps.Usage = usage.NewTracker()
	}
	if deps.Emitter == nil {
		deps.Emitter = &events.Emitter{River: deps.River}
	}
	if deps.Passwords == nil {
		deps.Passwords = password.Process()
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	if deps.Identity == nil && deps.Keyring != nil {
		// The defaults cannot be refused; a failure here is a programming
		// error, not something to run without.
		iss, err := identity.NewIssuer(deps.DB, deps.Keyring, identity.Config{Now: deps.Now})
		if err != nil {
			panic(fmt.Sprintf("api: the default token issuer: %v", err))
		}
		deps.Identity = iss
	}
	s := &Server{
		deps:   deps,
		db:     deps.DB,
		reads:  deps.DB,
		q:      dbsqlc.New(),
		logger: deps.Logger,
		now:    deps.Now,
	}
	s.accountStates = accounts.NewCache(deps.Now)
	s.outage = newOutageLog(deps.Logger, s.databasePing())
	s.metrics = newHTTPMetrics(deps.Registry, deps.Pool)
	if deps.Replica != nil {
		s.reads = deps.Replica.Reads()
		registerReplicaMetrics(deps.Registry, deps.Replica)
	}
	if deps.EventPages != nil {
		registerPageCache(deps.Registry, deps.EventPages)
	}
	s.app = fiber.New(fiber.Config{
		AppName:      "mailwatch",
		ErrorHandler: s.outage.handler(errorHandler(deps.Logger)), // dberrors.go
		JSONEncoder:  encodeJSON,
		BodyLimit:    deps.BodyLimit,
		// Bodies are read by the handlers that want them; fasthttp would
		// otherwise parse multipart forms before any middleware runs.
		DisablePreParseMultipartForm: true,
		DisableStartupMessage:        true,
		ReadTimeout:                  90 * time.Second,
		WriteTimeout:                 90 * time.Second,
		IdleTimeout:                  120 * time.Second,
		EnableTrustedProxyCheck:      len(deps.TrustedProxies) > 0,
		TrustedProxies:               deps.TrustedProxies,
		ProxyHeader:                  proxyHeader(deps.TrustedProxies),
	})
	ingress := deps.IngressLimiter
	if ingress == nil {
		ingress = deps.Limiter
	}
	s.router = &Router{
		app:            s.app,
		reflector:      newReflector(),
		validator:      newValidator(),
		requestTimeout: deps.RequestTimeout,
		rawTypes:       map[string]string{},
		alsoStatuses:   map[string][]int{},
		guard: &guard{
			db:      deps.DB,
			q:       s.q,
			limiter: deps.Limiter,
			ingress: ingress,
			usage:   deps.Usage,
			logger:  deps.Logger,
			now:     deps.Now,
			cache:   map[[32]byte]cachedKey{},
		},
	}
	s.app.Use(s.observe(), s.edgeRules) // middleware.go, edge.go
	s.routes()
	return s
}

func proxyHeader(trusted []string) string {
	if len(trusted) > 0 {
		return fiber.HeaderXForwardedFor
	}
	return ""
}

// App exposes the Fiber app (tests drive it with app.Test).
func (s *Server) App() *fiber.App { return s.app }

// Routes lists the documented routes, in OpenAPI path syntax.
func (s *Server) Routes() []RouteInfo { return s.router.Routes() }

// Router exposes the route table and OpenAPI document.
func (s *Server) Router() *Router { return s.router }

// Usage returns the usage tracker whose flush loop the caller runs.
func (s *Server) Usage() *usage.Tracker { return s.deps.Usage }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	// The connection keeps each request's first bytes: a request whose
	// header is too large for fasthttp is answered before its path is
	// parsed, in the data API's shape when it was for the data API (edge.go).
	err := s.app.Listener(requestStartListener{ln})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.app.ShutdownWithContext(ctx)
}

func (s *Server) routes() {
	if s.deps.DataAPIOnly {
		s.opsRoutes()
		s.tokenRoutes()
		s.dataAPIRoutes()
		s.providerTokens()
		return
	}
	s.opsRoutes()
	s.accountRoutes()
	s.apiKeyRoutes()
	s.dashboardRoutes()
	s.eventRoutes()        // events.go
	s.alertRoutes()        // alerts.go
	s.adminEventRoutes()   // admin_events.go
	s.subscriptionRoutes() // subscriptions.go
	s.channelRoutes()      // channels.go
	s.deliveryRoutes()     // deliveries.go
	s.receiverRoutes()     // receivers.go
	s.inboundRoutes()      // inbound.go
	s.adminSMSRoutes()     // admin_sms.go
	s.domainRoutes()       // domains.go

	// DNS fixes: dnsproviders.go, recommendations.go, mx.go.
	s.dnsProviderRoutes()
	s.recommendationRoutes()
	s.mxRoutes()
	s.transportRoutes()
	s.providerRoutes()     // providers.go
	s.suppressionRoutes()  // suppressions.go
	s.messageRoutes()      // messages.go
	s.tokenRoutes()        // token.go
	s.dataAPIRoutes()      // dataapi.go
	s.authProviderRoutes() // authproviders.go
	s.reportRoutes()       // reports.go
	s.reputationRoutes()   // reputation.go
	s.preferenceRoutes()   // preferences.go
	s.weeklyRoutes()       // weekly.go
	s.billingRoutes()      // billing.go
	s.adminRoutes()        // admin.go
	// The dashboard (package web) is mounted after these, last: its "/"
	// and "/static/*".
}

// databasePing is s.ping for the outage log (dberrors.go), or nil without
// a database.
func (s *Server) databasePing() func(context.Context) error {
	if s.db == nil {
		return nil
	}
	if _, ok := s.db.(pgx.Tx); ok {
		// Tests serve the whole API on one transaction: it cannot be
		// pinged from the outage watcher's goroutine, which would also
		// outlive the test's rollback.
		return nil
	}
	return s.ping
}

// ping checks the database, for /readyz and the outage log.
func (s *Server) ping(ctx context.Context) error {
	var one int
	return s.db.QueryRow(ctx, "SELECT 1").Scan(&one)
}
