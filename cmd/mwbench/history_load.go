package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ulule/limiter/v3"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/web"
)

// historyServer is the API with the dashboard mounted, as `mailwatch api`
// builds it: its own pool with the server's statement_timeout at
// DB_STATEMENT_TIMEOUT and every statement bounded a second later (a slow
// aggregate answers 503), REQUEST_TIMEOUT per request; the API's rate
// limit and the dashboard's per-account request budget lifted.
type historyServer struct {
	Base string
	api  *apiServer
	pool *pgxpool.Pool
}

func (s *historyServer) close() {
	s.api.close()
	s.pool.Close()
}

func startHistoryServer(ctx context.Context, env *benchEnv) (*historyServer, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return nil, err
	}
	pool, err := dbutil.NewPoolWith(ctx, env.URL, dbutil.PoolOptions{MaxConns: cfg.DBMaxConns, StatementTimeout: cfg.DBStatementTimeout})
	if err != nil {
		return nil, err
	}
	srv, err := env.startAPIWith(ctx, pool, func(d *api.Deps) {
		d.DB = dbutil.Bounded(pool, cfg.DBStatementTimeout+time.Second)
		d.RequestTimeout = cfg.RequestTimeout
	}, func(s *api.Server, d api.Deps) {
		web.Mount(s, web.DepsFrom(d, unlimitedStore{}))
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &historyServer{Base: srv.BaseURL, api: srv, pool: pool}, nil
}

// unlimitedStore is a limiter store that never limits: the dashboard's
// per-account budget (web.RequestsPerMinute) would answer the load 429.
type unlimitedStore struct{}

func (unlimitedStore) Get(_ context.Context, _ string, r limiter.Rate) (limiter.Context, error) {
	return limiter.Context{Limit: r.Limit, Remaining: r.Limit}, nil
}
func (s unlimitedStore) Peek(ctx context.Context, k string, r limiter.Rate) (limiter.Context, error) {
	return s.Get(ctx, k, r)
}
func (s unlimitedStore) Reset(ctx context.Context, k string, r limiter.Rate) (limiter.Context, error) {
	return s.Get(ctx, k, r)
}
func (s unlimitedStore) Increment(ctx context.Context, k string, _ int64, r limiter.Rate) (limiter.Context, error) {
	return s.Get(ctx, k, r)
}

// dashboardSession signs in through the dashboard's form, as a browser
// does (the double-submit token in a cookie and a field), and returns the
// session cookie.
func dashboardSession(ctx context.Context, base, email, password string) (string, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	form := url.Values{"email": {email}, "password": {password}, "csrf": {token}}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/signin", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "mw_csrf", Value: token})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "mw_session" && c.Value != "" {
			return c.Name + "=" + c.Value, nil
		}
	}
	return "", fmt.Errorf("dashboard sign-in answered %d without a session", resp.StatusCode)
}

// historyEndpoint is one row of the table.
type historyEndpoint struct {
	Name     string
	Path     string // {busy} stands for the busy domain
	Web      bool   // a dashboard page: the session cookie, not the key
	Baseline bool
}

var historyEndpoints = []historyEndpoint{
	{Name: "GET /api/accounts/me/messages/daily-volume?days=7", Path: "/api/accounts/me/messages/daily-volume?days=7"},
	{Name: "GET .../messages/daily-volume?days=90", Path: "/api/accounts/me/messages/daily-volume?days=90"},
	{Name: "GET .../messages/type-breakdown", Path: "/api/accounts/me/messages/type-breakdown"},
	{Name: "GET /api/accounts/me/dashboard-summary", Path: "/api/accounts/me/dashboard-summary"},
	{Name: "GET .../events/daily-volume", Path: "/api/accounts/me/events/daily-volume"},
	{Name: "GET .../events/type-breakdown", Path: "/api/accounts/me/events/type-breakdown"},
	{Name: "GET .../domains/{domain}/dmarc/sources (busy domain)", Path: "/api/accounts/me/domains/{busy}/dmarc/sources"},
	{Name: "GET .../dmarc/guidance (busy domain)", Path: "/api/accounts/me/domains/{busy}/dmarc/guidance"},
	{Name: "dashboard overview page /", Path: "/", Web: true},
	{Name: "dashboard domain page (busy domain)", Path: "/domains/{busy}", Web: true},
	{Name: "GET .../events?limit=50 (flat baseline)", Path: "/api/accounts/me/events?limit=50", Baseline: true},
}

// historyLoad is one endpoint's measurement: every answer's latency counts
// in the percentiles, 503s at the statement timeout included.
type historyLoad struct {
	Requests int
	Non200   map[int]int // answers by status, 200 excluded
	Errors   int         // requests without an answer
	P50, P99 time.Duration
	lat      []time.Duration
}

// add merges another turn's answers into l; finish computes the
// percentiles over every turn.
func (l *historyLoad) add(o historyLoad) {
	if l.Non200 == nil {
		l.Non200 = map[int]int{}
	}
	for code, n := range o.Non200 {
		l.Non200[code] += n
	}
	l.Errors += o.Errors
	l.lat = append(l.lat, o.lat...)
}

func (l *historyLoad) finish() {
	sort.Slice(l.lat, func(i, j int) bool { return l.lat[i] < l.lat[j] })
	l.Requests, l.P50, l.P99 = len(l.lat), percentile(l.lat, 50), percentile(l.lat, 99)
}

func (l historyLoad) non200() int {
	n := 0
	for _, c := range l.Non200 {
		n += c
	}
	return n
}

// non200Text is "3 of 4 (503 x3)", or "" when every answer was 200.
func (l historyLoad) non200Text() string {
	if l.non200() == 0 && l.Errors == 0 {
		return ""
	}
	codes := make([]int, 0, len(l.Non200))
	for c := range l.Non200 {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes)+1)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d x%d", c, l.Non200[c]))
	}
	if l.Errors > 0 {
		parts = append(parts, fmt.Sprintf("no answer x%d", l.Errors))
	}
	return fmt.Sprintf("%d of %d (%s)", l.non200()+l.Errors, l.Requests+l.Errors, strings.Join(parts, ", "))
}

// historyClients is the number of concurrent clients (BENCH_HISTORY_CLIENTS,
// default 4), each sending its requests one after the other.
func historyClients() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_HISTORY_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 4
}

// historyRounds is how many turns each size gets per endpoint: the sizes
// alternate (S, M, then M, S, ...) so that a change of the machine's load
// during an endpoint's measurement weighs on every size alike.
const historyRounds = 4

// measureHistorySizes loads each endpoint from historyClients clients for
// BENCH_SECONDS per size, in historyRounds turns alternating the sizes
// (each client sends at least one request per turn), after one warm-up
// request per size.
func measureHistorySizes(ctx context.Context, runs []*historyRun) error {
	conns, d := historyClients(), benchDuration()
	fmt.Printf("load      %d clients, %s per endpoint and size in %d turns alternating the sizes, load average %s\n",
		conns, d, historyRounds, loadAverage())
	for _, r := range runs {
		r.res.LoadBefore = loadAverage()
		r.res.Endpoints = make([]historyLoad, len(historyEndpoints))
	}
	for ei, e := range historyEndpoints {
		reqs := make([]func(context.Context) (*http.Request, error), len(runs))
		for i, r := range runs {
			reqs[i] = historyRequest(r.srv, r.seed, e)
			warm := runHistoryLoad(ctx, 1, 0, reqs[i])
			if warm.Non200[http.StatusUnauthorized]+warm.Non200[http.StatusNotFound]+warm.Non200[http.StatusSeeOther] > 0 {
				return fmt.Errorf("%s at %s answered %s: the bench's account or session is wrong", e.Name, r.res.Size.Name, warm.non200Text())
			}
		}
		for turn := 0; turn < historyRounds; turn++ {
			for k := range runs {
				i := k
				if turn%2 == 1 {
					i = len(runs) - 1 - k
				}
				runs[i].res.Endpoints[ei].add(runHistoryLoad(ctx, conns, d/historyRounds, reqs[i]))
			}
		}
		for _, r := range runs {
			res := &r.res.Endpoints[ei]
			res.finish()
			fmt.Printf("measured  %s %-56s p50 %9.2f ms  p99 %9.2f ms  %5d requests  %s\n", r.res.Size.Name, e.Name, ms(res.P50), ms(res.P99), res.Requests, res.non200Text())
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, r := range runs {
		r.res.LoadAfter = loadAverage()
	}
	return nil
}

// historyRequest builds the requests of endpoint e against one size.
func historyRequest(srv *historyServer, seed *historySeed, e historyEndpoint) func(context.Context) (*http.Request, error) {
	u := srv.Base + strings.ReplaceAll(e.Path, "{busy}", url.PathEscape(seed.Busy))
	return func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			return nil, err
		}
		if e.Web {
			req.Header.Set("Cookie", seed.Cookie)
		} else {
			req.Header.Set("Authorization", "Bearer "+seed.Key)
		}
		return req, nil
	}
}

// runHistoryLoad sends requests from conns clients, one after the other
// per client, until d has passed and each client has had an answer.
func runHistoryLoad(ctx context.Context, conns int, d time.Duration, newReq func(context.Context) (*http.Request, error)) historyLoad {
	client := newHTTPClient(conns)
	client.Timeout = 2 * time.Minute
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(d)
	var (
		mu  sync.Mutex
		lat []time.Duration
		res = historyLoad{Non200: map[int]int{}}
		wg  sync.WaitGroup
	)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; (n == 0 || time.Now().Before(deadline)) && ctx.Err() == nil; n++ {
				t0 := time.Now()
				status, err := historyGet(ctx, client, newReq)
				took := time.Since(t0)
				mu.Lock()
				switch {
				case err != nil:
					res.Errors++
				default:
					lat = append(lat, took)
					if status != http.StatusOK {
						res.Non200[status]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.lat = lat
	res.finish()
	return res
}

func historyGet(ctx context.Context, client *http.Client, newReq func(context.Context) (*http.Request, error)) (int, error) {
	req, err := newReq(ctx)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
