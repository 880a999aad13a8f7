package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/migrate"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// benchEnv is a freshly migrated database of the benchmark's own.
type benchEnv struct {
	AdminURL string
	URL      string
	Name     string
	Pool     *pgxpool.Pool
	Logger   *slog.Logger
}

func newBenchEnv(ctx context.Context) (*benchEnv, error) {
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		return nil, fmt.Errorf("DATABASE_URL must point at a Postgres server (scripts/bench sets it)")
	}
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "mailwatch_bench_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("error creating benchmark database: %w", err)
	}
	url := fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, cfg.Host, cfg.Port, name)
	pool, err := dbutil.NewPool(ctx, url, 40)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := migrate.Up(ctx, pool, logger); err != nil {
		return nil, err
	}
	return &benchEnv{AdminURL: admin, URL: url, Name: name, Pool: pool, Logger: logger}, nil
}

// close drops the bench's database, unless BENCH_KEEP_DB=1 keeps it for a
// look at what was measured (its name is printed).
func (e *benchEnv) close() {
	e.Pool.Close()
	if os.Getenv("BENCH_KEEP_DB") == "1" {
		fmt.Printf("kept      database %s (BENCH_KEEP_DB=1)\n", e.Name)
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.AdminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{e.Name}.Sanitize()+" WITH (FORCE)")
}

// apiServer is an API process's worth of server on a loopback port.
type apiServer struct {
	Srv     *api.Server
	BaseURL string
	stop    func()
}

// startAPI serves the real API (as `mailwatch api` builds it, with the
// rate limit lifted and the access log formatted as JSON into io.Discard).
func (e *benchEnv) startAPI(ctx context.Context, pool *pgxpool.Pool, adjust func(*api.Deps)) (*apiServer, error) {
	return e.startAPIWith(ctx, pool, adjust, nil)
}

// startAPIWith is startAPI with mount, when not nil, called on the built
// server before it serves (the dashboard mounts itself there, as
// `mailwatch api` does).
func (e *benchEnv) startAPIWith(ctx context.Context, pool *pgxpool.Pool, adjust func(*api.Deps), mount func(*api.Server, api.Deps)) (*apiServer, error) {
	riverClient, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: e.Logger}, jobs.Options{})
	if err != nil {
		return nil, err
	}
	keyring, err := secretbox.NewKeyring(make([]byte, 32))
	if err != nil {
		return nil, err
	}
	guard, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	if err != nil {
		return nil, err
	}
	deps := api.Deps{
		StoreDeps:   api.StoreDeps{DB: pool, Pool: pool, River: riverClient, Keyring: keyring},
		WebhookDeps: api.WebhookDeps{WebhookGuard: guard, WebhookClient: webhook.NewClient(guard, webhook.ClientOptions{})},
		IngressDeps: api.IngressDeps{InboundDomain: "inbound.mailwatch.test"},
		HTTPDeps:    api.HTTPDeps{Limiter: limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1 << 40})},
		Logger:      slog.New(slog.NewJSONHandler(io.Discard, nil)),
		// The API role's default: EVENTS_PAGE_CACHE_TTL=1s, 32 MiB.
		EventDeps: api.EventDeps{EventPages: events.NewFirstPages(time.Second, 32<<20)},
	}
	if adjust != nil {
		adjust(&deps)
	}
	srv := api.New(deps)
	if mount != nil {
		mount(srv, deps)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	usageCtx, cancel := context.WithCancel(ctx)
	go srv.Usage().Run(usageCtx, pool, 10*time.Second, e.Logger)
	go func() { _ = srv.Serve(ln) }()
	return &apiServer{Srv: srv, BaseURL: "http://" + ln.Addr().String(), stop: func() {
		cancel()
		_ = srv.Shutdown(context.Background())
	}}, nil
}

func (a *apiServer) close() { a.stop() }

// loadResult summarises one load run.
type loadResult struct {
	Requests int
	Errors   int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

func (r loadResult) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

func (r loadResult) String() string {
	return fmt.Sprintf("%9.0f req/s  p50 %7.2f ms  p99 %7.2f ms  (%d requests, %d errors)",
		r.RPS(), ms(r.P50), ms(r.P99), r.Requests, r.Errors)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// newHTTPClient keeps one connection per worker alive.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// runLoad runs do from conns goroutines for d and measures each call.
func runLoad(ctx context.Context, conns int, d time.Duration, do func(ctx context.Context, client *http.Client) error) loadResult {
	client := newHTTPClient(conns)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(d)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      int
		wg        sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			localErrs := 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := do(ctx, client); err != nil {
					localErrs++
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			errs += localErrs
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return loadResult{Requests: len(latencies), Errors: errs, Elapsed: elapsed, P50: percentile(latencies, 50), P99: percentile(latencies, 99)}
}

// getOK returns a load function that GETs url with an optional bearer key
// and expects 200.
func getOK(url, key string) func(ctx context.Context, client *http.Client) error {
	return func(ctx context.Context, client *http.Client) error {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// benchDuration is how long each measured load runs (BENCH_SECONDS).
func benchDuration() time.Duration {
	if s := os.Getenv("BENCH_SECONDS"); s != "" {
		if d, err := time.ParseDuration(s + "s"); err == nil && d > 0 {
			return d
		}
	}
	return 10 * time.Second
}
