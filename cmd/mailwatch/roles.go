package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/sync/errgroup"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dataapi"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/emailaddr"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/migrate"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/readreplica"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
	"github.com/mailwatch/mailwatch/web"
)

func openPool(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	if err := cfg.Require("DATABASE_URL"); err != nil {
		return nil, fmt.Errorf("%w (to use the database of a running scripts/run: source .local/env)", err)
	}
	return dbutil.NewPool(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
}

// openAPIPool is openPool with the server's statement_timeout set to
// DB_STATEMENT_TIMEOUT: the API runs no statement that should take longer,
// and Postgres cancelling a slow one keeps the connection (the client-side
// bound, a second later, is for a server that does not answer at all).
func openAPIPool(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	if err := cfg.Require("DATABASE_URL"); err != nil {
		return nil, fmt.Errorf("%w (to use the database of a running scripts/run: source .local/env)", err)
	}
	return dbutil.NewPoolWith(ctx, cfg.DatabaseURL, dbutil.PoolOptions{MaxConns: cfg.DBMaxConns, StatementTimeout: cfg.DBStatementTimeout})
}

// boundedDB is the pool as requests and SMTP sessions use it: every
// statement, and the wait for a connection, ends within
// DB_STATEMENT_TIMEOUT plus a second even when Postgres is frozen.
func boundedDB(cfg *config.Config, pool *pgxpool.Pool) dbutil.Executor {
	return dbutil.Bounded(pool, cfg.DBStatementTimeout+time.Second)
}

func runMigrate(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdout io.Writer) error {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := migrate.Up(ctx, pool, logger)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "database is up to date")
	} else {
		fmt.Fprintln(stdout, "applied:", strings.Join(applied, ", "))
	}
	return nil
}

// newLimiterStore returns where rate-limit counters live: in Redis when
// REDIS_URL is set, so that every replica shares one budget, otherwise in
// this process's memory.
func newLimiterStore(ctx context.Context, cfg *config.Config) (limiter.Store, func(), error) {
	if cfg.RedisURL == "" {
		return memory.NewStore(), func() {}, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("error parsing REDIS_URL: %w", err)
	}
	client := redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("error reaching Redis at REDIS_URL: %w", err)
	}
	store, err := sredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "mailwatch:ratelimit", MaxRetry: 3})
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("error creating Redis rate-limit store: %w", err)
	}
	return store, func() { client.Close() }, nil
}

// apiRole is a running API: the server and the loops it needs.
type apiRole struct {
	srv      *api.Server
	waiters  *receivers.Hub
	replica  replica
	closeLim func()
}

func newAPIRole(ctx context.Context, cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool, reg *prometheus.Registry, riverClient *river.Client[pgx.Tx], dataAPIOnly bool) (*apiRole, error) {
	sh, err := buildShared(cfg)
	if err != nil {
		return nil, err
	}
	store, closeLim, err := newLimiterStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	waiters := receivers.NewHub(receivers.ConnectURL(cfg.DatabaseURL), logger)
	var issuer *identity.Issuer
	if sh.keyring != nil {
		issuer, err = identity.NewIssuer(boundedDB(cfg, pool), sh.keyring, identity.Config{Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, TTL: cfg.JWTTTL})
		if err != nil {
			closeLim()
			return nil, err
		}
	}
	replica, err := openReplica(ctx, cfg, logger, pool)
	if err != nil {
		closeLim()
		return nil, err
	}
	deps := api.Deps{
		StoreDeps: api.StoreDeps{DB: boundedDB(cfg, pool), Pool: pool, River: riverClient, Keyring: sh.keyring, Replica: replica.router},
		EventDeps: api.EventDeps{EventPages: events.NewFirstPages(cfg.EventsPageCacheTTL, cfg.EventsPageCacheBytes)},
		HTTPDeps: api.HTTPDeps{
			Limiter:        limiter.New(store, limiter.Rate{Period: time.Minute, Limit: int64(cfg.RateLimitPerMinute)}),
			IngressLimiter: limiter.New(store, limiter.Rate{Period: time.Minute, Limit: int64(cfg.IngressRatePerMinute)}),
			RequestTimeout: cfg.RequestTimeout,
			BodyLimit:      cfg.BodyLimitBytes,
			TrustedProxies: cfg.TrustedProxies,
			PublicBaseURL:  cfg.PublicBaseURL,
			Registry:       reg,
		},
		IngressDeps: api.IngressDeps{
			InboundDomain:         cfg.InboundDomain,
			InboundWebhookSecret:  cfg.InboundWebhookSecret,
			TwilioAuthToken:       cfg.TwilioAuthToken,
			MaxMessageBytes:       cfg.SMTPMaxMessageBytes,
			Waiters:               waiters,
			SNSCerts:              &ses.HTTPCertFetcher{Client: sh.aws},
			ProviderWebhookMaxAge: cfg.ProviderWebhookMaxAge,
			StripeWebhookSecret:   cfg.StripeWebhookSecret,
		},
		WebhookDeps: api.WebhookDeps{WebhookGuard: sh.guard, WebhookClient: webhook.NewClient(sh.guard, webhook.ClientOptions{}),
			ChannelHosts: sh.channelHosts, DashboardURL: notify.BaseURL(cfg.PublicBaseURL, cfg.ListenAddr)},
		DNSDeps:  api.DNSDeps{Resolver: sh.resolver, DNSFix: sh.dnsFix, SMTPProbe: cfg.SMTPProbe},
		PlanDeps: api.PlanDeps{EventRetentionDays: cfg.EventRetentionDays, DefaultPlan: cfg.DefaultPlan},
		AuthDeps: api.AuthDeps{Identity: issuer, DataAPIOnly: dataAPIOnly,
			DataAPI: api.DataAPIOptions{MaxRows: cfg.DataAPIMaxRows, StatementTimeout: cfg.DataAPIStatementTimeout,
				Pages: dataapi.NewPages(cfg.EventsPageCacheTTL, cfg.EventsPageCacheBytes)}},
		Logger: logger,
	}
	srv := api.New(deps)
	if !dataAPIOnly {
		// The dashboard, on the same app after every API route: it owns
		// "/" and "/static/*".
		web.Mount(srv, web.DepsFrom(deps, store))
	}
	return &apiRole{srv: srv, waiters: waiters, replica: replica, closeLim: closeLim}, nil
}

// replica is the API's read replica (DATABASE_READ_URL): its pool and the
// router that measures its lag. Both are nil without one.
type replica struct {
	pool   *pgxpool.Pool
	router *readreplica.Router
}

func openReplica(ctx context.Context, cfg *config.Config, logger *slog.Logger, primary *pgxpool.Pool) (replica, error) {
	if cfg.DatabaseReadURL == "" {
		return replica{}, nil
	}
	pool, err := dbutil.NewPoolWith(ctx, cfg.DatabaseReadURL, dbutil.PoolOptions{MaxConns: cfg.DBMaxConns, StatementTimeout: cfg.DBStatementTimeout})
	if err != nil {
		return replica{}, fmt.Errorf("DATABASE_READ_URL: %w", err)
	}
	r := readreplica.New(boundedDB(cfg, primary), boundedDB(cfg, pool), readreplica.Options{MaxLag: cfg.DatabaseReadMaxLag, Logger: logger})
	return replica{pool: pool, router: r}, nil
}

// serve runs the API until ctx ends, then shuts down gracefully: the
// listener closes, in-flight requests finish (up to SHUTDOWN_TIMEOUT) and
// pending usage counts are flushed.
func (r *apiRole) serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool) error {
	defer r.closeLim()
	if r.replica.pool != nil {
		defer r.replica.pool.Close()
		go r.replica.router.Run(ctx)
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.ListenAddr, err)
	}
	logger.Info("API listening", slog.String("addr", ln.Addr().String()))
	usageCtx, stopUsage := context.WithCancel(context.WithoutCancel(ctx))
	usageDone := make(chan struct{})
	go func() {
		defer close(usageDone)
		r.srv.Usage().Run(usageCtx, pool, 10*time.Second, logger)
	}()

	// The waiter hub's LISTEN connection lives as long as ctx; when ctx ends
	// it closes and ends every long poll (503), so shutdown need not wait
	// out their timeouts.
	go func() { _ = r.waiters.Run(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- r.srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		stopUsage()
		<-usageDone
		return err
	case <-ctx.Done():
	}
	logger.Info("API shutting down; waiting for in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = r.srv.Shutdown(shutdownCtx)
	stopUsage()
	<-usageDone
	if err != nil {
		return fmt.Errorf("error shutting down API: %w", err)
	}
	return <-serveErr
}

func runAPI(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	return runAPIRole(ctx, cfg, logger, false)
}

// runDataAPI serves only the row-level-secured data API (/rest/v1, token
// issuance and the JWKS), so it can scale and be exposed apart from the
// REST API; `api` and `dev` serve it too.
func runDataAPI(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	return runAPIRole(ctx, cfg, logger, true)
}

func runAPIRole(ctx context.Context, cfg *config.Config, logger *slog.Logger, dataAPIOnly bool) error {
	pool, err := openAPIPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if dataAPIOnly {
		logStart(logger, cfg, "data-api")
	} else {
		logStart(logger, cfg, "api")
	}
	deps := jobs.Deps{Pool: pool, Logger: logger}
	riverClient, err := jobs.NewClient(deps, jobs.Options{})
	if err != nil {
		return err
	}
	role, err := newAPIRole(ctx, cfg, logger, pool, prometheus.NewRegistry(), riverClient, dataAPIOnly)
	if err != nil {
		return err
	}
	return role.serve(ctx, cfg, logger, pool)
}

func runWorker(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string) error {
	var queues []string
	for _, a := range args {
		v, ok := strings.CutPrefix(a, "--queues=")
		if !ok {
			return usageError{fmt.Sprintf("unknown worker flag %q", a)}
		}
		for _, q := range strings.Split(v, ",") {
			if q = strings.TrimSpace(q); q != "" {
				queues = append(queues, q)
			}
		}
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	logStart(logger, cfg, "worker")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), api.NewPoolCollector(pool))

	g, gctx := errgroup.WithContext(ctx)
	deps, err := workerDeps(cfg, logger, pool, reg)
	if err != nil {
		return err
	}
	deps.Observer = jobs.NewObserver(pool, logger, reg) // worker_ops.go
	g.Go(func() error { return runWorkerClient(gctx, cfg, deps, queues) })
	g.Go(func() error { return serveOpsWith(gctx, cfg.MetricsAddr, workerReadyz(deps.Observer), reg, logger) })
	return g.Wait()
}

// runWorkerClient works jobs until ctx ends, then stops River gracefully:
// running jobs get SHUTDOWN_TIMEOUT to finish before they are cancelled.
func runWorkerClient(ctx context.Context, cfg *config.Config, deps jobs.Deps, queues []string) error {
	logger := deps.Logger
	client, err := jobs.NewClient(deps, jobs.Options{
		Concurrency:        cfg.WorkerConcurrency,
		WebhookConcurrency: cfg.WebhookConcurrency,
		WithPeriodic:       true,
		Queues:             queues,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("error starting River: %w", err)
	}
	logger.Info("worker started", slog.Int("concurrency", cfg.WorkerConcurrency))
	if deps.Observer != nil {
		go deps.Observer.Run(ctx, client)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		logger.Warn("River did not stop in time; cancelling running jobs", slog.Any("error", err))
		hardCtx, hardCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hardCancel()
		return client.StopAndCancel(hardCtx)
	}
	return nil
}

// serveOps serves /healthz, /readyz and /metrics for roles without the API.
func serveOps(ctx context.Context, addr string, pool *pgxpool.Pool, reg *prometheus.Registry, logger *slog.Logger) error {
	return serveOpsWith(ctx, addr, func(c *fiber.Ctx) error {
		pingCtx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(pingCtx); err != nil {
			return c.Status(503).JSON(fiber.Map{"detail": "database unreachable"})
		}
		return c.JSON(fiber.Map{"status": "ok"})
	}, reg, logger)
}

// serveOpsWith is serveOps with the role's own /readyz.
func serveOpsWith(ctx context.Context, addr string, readyz fiber.Handler, reg *prometheus.Registry, logger *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", readyz)
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("error listening on METRICS_ADDR %s: %w", addr, err)
	}
	logger.Info("ops endpoints listening", slog.String("addr", ln.Addr().String()))
	go func() {
		<-ctx.Done()
		_ = app.ShutdownWithTimeout(5 * time.Second)
	}()
	if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// runDev runs migrations and then the API and a worker in one process.
func runDev(ctx context.Context, cfg *config.Config, logger *slog.Logger, stderr io.Writer) error {
	if len(cfg.SecretKey) == 0 {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		cfg.SecretKey = key
		fmt.Fprintln(stderr, "mailwatch dev: MAILWATCH_SECRET_KEY is unset; generated a throwaway key for this run.\n"+
			"  Secrets encrypted with it cannot be read after a restart. To keep one, export:\n"+
			"  MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(key))
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, logger); err != nil {
		return err
	}
	logStart(logger, cfg, "dev")
	deps := jobs.Deps{Pool: pool, Logger: logger}
	insertClient, err := jobs.NewClient(deps, jobs.Options{})
	if err != nil {
		return err
	}
	// One process, one /metrics: the API's series and the worker's (River's
	// queues, jobs and leader, webhook pushes) share the API's registry.
	reg := prometheus.NewRegistry()
	role, err := newAPIRole(ctx, cfg, logger, pool, reg, insertClient, false)
	if err != nil {
		return err
	}
	wdeps, err := workerDeps(cfg, logger, pool, reg)
	if err != nil {
		return err
	}
	wdeps.Observer = jobs.NewObserver(pool, logger, reg) // worker_ops.go
	smtpSrv, err := newSMTPServer(cfg, logger, pool, insertClient)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return role.serve(gctx, cfg, logger, pool) })
	g.Go(func() error { return runWorkerClient(gctx, cfg, wdeps, nil) })
	g.Go(func() error { return serveSMTP(gctx, cfg, logger, smtpSrv) })
	g.Go(func() error { return serveDevUI(gctx, cfg, logger, pool, insertClient) }) // ui.go
	return g.Wait()
}

func runAdmin(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	if len(args) != 2 || (args[0] != "grant" && args[0] != "revoke") {
		return usageError{"usage: mailwatch admin grant|revoke <email>"}
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	email, err := emailaddr.Normalise(args[1])
	if err != nil {
		return fmt.Errorf("%q: %w", args[1], err)
	}
	n, err := dbsqlc.New().AccountSetAdmin(ctx, pool, dbsqlc.AccountSetAdminParams{Email: email, IsAdmin: args[0] == "grant"})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no account with email %s", email)
	}
	if args[0] == "grant" {
		fmt.Fprintf(stdout, "%s is now an admin (effective within 5 s)\n", email)
	} else {
		fmt.Fprintf(stdout, "%s is no longer an admin (effective within 5 s)\n", email)
	}
	return nil
}

// logStart logs one short line as a process starts: its role, the build,
// where it listens and the few settings that explain its behaviour at a
// glance. Every setting (secrets redacted) follows at debug.
func logStart(logger *slog.Logger, cfg *config.Config, role string) {
	attrs := []any{slog.String("role", role), slog.String("version", buildVersion())}
	if role == "api" || role == "data-api" || role == "dev" {
		attrs = append(attrs, slog.String("listen", cfg.ListenAddr))
	}
	if role == "smtp" || role == "dev" {
		attrs = append(attrs, slog.String("smtp", cfg.SMTPAddr))
	}
	if role == "ui" || role == "dev" {
		attrs = append(attrs, slog.String("ui", cfg.UIAddr))
	}
	if cfg.PublicBaseURL != "" {
		attrs = append(attrs, slog.String("public_base_url", cfg.PublicBaseURL))
	}
	if cfg.WebhookAllowedCIDRs != "" {
		attrs = append(attrs, slog.String("webhook_allowed_cidrs", cfg.WebhookAllowedCIDRs))
	}
	if cfg.ChannelAllowedHosts != "" {
		attrs = append(attrs, slog.String("channel_allowed_hosts", cfg.ChannelAllowedHosts))
	}
	attrs = append(attrs, slog.String("log_level", cfg.LogLevel.String()))
	logger.Info("starting mailwatch", attrs...)
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		settings := config.Redacted(os.LookupEnv)
		names := slices.Sorted(maps.Keys(settings))
		all := make([]any, 0, len(names))
		for _, k := range names {
			all = append(all, slog.String(k, settings[k]))
		}
		logger.Debug("settings", all...)
	}
}
