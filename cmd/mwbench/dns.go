package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	dnsBenchDomains     = 1000
	dnsBenchConcurrency = 100 // WORKER_CONCURRENCY's default
	dnsBenchChanged     = 100 // domains whose SPF changes between the rounds
)

// dnsBenchZone is zone data for n domains shaped like a well-configured
// sender: SPF with an include and mx, DMARC at reject with reports, a DKIM
// key found by the common-selector probe, two MX hosts, MTA-STS, TLS-RPT and
// BIMI.
func dnsBenchZone(n int) string {
	var b strings.Builder
	b.WriteString("$TTL 300\n")
	b.WriteString("_spf.provider.bench. TXT \"v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 ~all\"\n")
	b.WriteString("mx1.provider.bench. A 192.0.2.10\nmx2.provider.bench. A 192.0.2.11\n")
	for i := range n {
		d := fmt.Sprintf("d%d.bench.", i)
		name := strings.TrimSuffix(d, ".")
		fmt.Fprintf(&b, "%s SOA ns.%s hostmaster.%s 1 7200 3600 1209600 300\n", d, d, d)
		fmt.Fprintf(&b, "%s TXT \"v=spf1 include:_spf.provider.bench mx -all\"\n", d)
		fmt.Fprintf(&b, "%s MX 10 mx1.provider.bench.\n%s MX 20 mx2.provider.bench.\n", d, d)
		fmt.Fprintf(&b, "_dmarc.%s TXT \"v=DMARC1; p=reject; rua=mailto:dmarc@%s\"\n", d, name)
		fmt.Fprintf(&b, "google._domainkey.%s TXT \"v=DKIM1; k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs=\"\n", d)
		fmt.Fprintf(&b, "_mta-sts.%s TXT \"v=STSv1; id=1\"\n", d)
		fmt.Fprintf(&b, "_smtp._tls.%s TXT \"v=TLSRPTv1; rua=mailto:tls@%s\"\n", d, name)
		fmt.Fprintf(&b, "default._bimi.%s TXT \"v=BIMI1; l=https://%s/logo.svg; a=https://%s/vmc.pem\"\n", d, name, name)
	}
	return b.String()
}

// stsPolicyTransport serves every MTA-STS policy fetch from memory: the
// benchmark measures DNS checking, not HTTPS.
type stsPolicyTransport struct{}

func (stsPolicyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body := "version: STSv1\nmode: enforce\nmx: *.provider.bench\nmax_age: 1209600\n"
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{"text/plain"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    r,
	}, nil
}

// benchDNS checks 1,000 domains served by a loopback DNS server through the
// real path: domains created with the API (each queues its first check),
// then a River worker client works the check jobs (CheckAll, change
// detection, snapshot, health score and history, job completion in one
// transaction). A second round, after changing 100 domains' SPF records,
// measures steady-state re-checks and counts the dns_record_changed events.
func benchDNS(ctx context.Context, env *benchEnv) error {
	srv, err := dnstest.NewServer(dnsBenchZone(dnsBenchDomains))
	if err != nil {
		return err
	}
	defer srv.Close()
	resolver := dnscheck.NewClient(srv.Addr(), 2*time.Second)
	stsClient := &http.Client{Transport: stsPolicyTransport{}}

	apiSrv, err := env.startAPI(ctx, env.Pool, func(d *api.Deps) { d.Resolver = resolver; d.MTASTSClient = stsClient })
	if err != nil {
		return err
	}
	defer apiSrv.close()
	accountID, key, err := createAccount(ctx, apiSrv.BaseURL, fmt.Sprintf("dns-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	if err := setBenchPlan(ctx, env, accountID); err != nil { // 1,000 domains: business
		return err
	}

	// Create the domains through the API; each POST queues a check job.
	t0 := time.Now()
	if err := createBenchDomains(ctx, apiSrv.BaseURL, key); err != nil {
		return err
	}
	fmt.Printf("created %d domains through the API in %.2f s (each with its first check job)\n", dnsBenchDomains, time.Since(t0).Seconds())

	// CheckAll alone (no database) at the same concurrency, for reference.
	direct := checkAllDirect(ctx, resolver, stsClient, srv)
	fmt.Printf("CheckAll only (no DB), %d at a time:   %7.0f checks/s  p50 %6.2f ms  p99 %6.2f ms  %5.1f DNS queries/domain\n",
		dnsBenchConcurrency, direct.rate, ms(direct.p50), ms(direct.p99), direct.queries)

	deps, worker, err := newDNSWorker(env, env.Pool, resolver, stsClient)
	if err != nil {
		return err
	}
	completed, cancel := worker.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancel()

	q0 := srv.Queries()
	start := time.Now()
	if err := worker.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	}()
	if err := dnsFirstRound(ctx, env, srv, completed, q0, start); err != nil {
		return err
	}
	ids, err := dnsSecondRound(ctx, env, srv, worker, completed, accountID)
	if err != nil {
		return err
	}
	checker := &domains.Checker{DB: env.Pool, Resolver: resolver, MTASTS: stsClient, Emitter: &events.Emitter{}, Fixes: deps.DNSFix, Logger: env.Logger}
	if err := dnsRecommendationRounds(ctx, env, ids, checker); err != nil {
		return err
	}
	auth, err := measureAuthRoute(ctx, env, 32, benchDuration())
	if err != nil {
		return err
	}
	fmt.Printf("baseline GET /api/accounts/me, 32 connections: %s\n", auth)
	return nil
}

// newDNSWorker is the check worker: one client on the DNS queue
// (MaxWorkers 100, WORKER_CONCURRENCY's default) on pool, resolving with
// resolver.
func newDNSWorker(env *benchEnv, pool *pgxpool.Pool, resolver dnscheck.Resolver, sts *http.Client) (jobs.Deps, *river.Client[pgx.Tx], error) {
	deps := jobs.Deps{Pool: pool, Logger: env.Logger, Resolver: resolver, MTASTSClient: sts, DNSFix: &domains.FixDeps{}}
	worker, err := jobs.NewClient(deps, jobs.Options{Concurrency: dnsBenchConcurrency, Queues: []string{queues.DNS}})
	return deps, worker, err
}

// dnsFirstRound waits for the first check of every domain (queued by its
// creation, worked since start) and prints the round and the scores.
func dnsFirstRound(ctx context.Context, env *benchEnv, srv *dnstest.Server, completed <-chan *river.Event, q0 int64, start time.Time) error {
	first, err := waitJobs(ctx, completed, dnsBenchDomains)
	if err != nil {
		return err
	}
	r1 := jobRound(first, time.Since(start), srv.Queries()-q0)
	fmt.Printf("round 1 (first checks via River jobs): %s\n", r1)

	var scored, avg float64
	if err := env.Pool.QueryRow(ctx, "SELECT count(score), coalesce(avg(score), 0) FROM domains").Scan(&scored, &avg); err != nil {
		return err
	}
	fmt.Printf("  %0.f domains scored, average score %.1f\n", scored, avg)
	return nil
}

// dnsSecondRound changes some domains' SPF, re-checks every domain
// through the workers and checks the change events; it returns the
// domains' ids.
func dnsSecondRound(ctx context.Context, env *benchEnv, srv *dnstest.Server, worker *river.Client[pgx.Tx], completed <-chan *river.Event, accountID string) ([]uuid.UUID, error) {
	// Round 2: change SPF on some domains, then re-check every domain as
	// the periodic scheduler would (here all at once).
	for i := range dnsBenchChanged {
		if err := srv.Set(fmt.Sprintf("d%d.bench. TXT \"v=spf1 include:_spf.provider.bench -all\"\n", i)); err != nil {
			return nil, err
		}
	}
	ids, err := benchDomainIDs(ctx, env)
	if err != nil {
		return nil, err
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: domains.CheckArgs{DomainID: id}}
	}
	q0 := srv.Queries()
	start := time.Now()
	if _, err := worker.InsertMany(ctx, params); err != nil {
		return nil, err
	}
	second, err := waitJobs(ctx, completed, len(ids))
	if err != nil {
		return nil, err
	}
	r2 := jobRound(second, time.Since(start), srv.Queries()-q0)
	fmt.Printf("round 2 (re-checks, %d SPF changes):   %s\n", dnsBenchChanged, r2)

	var changed, history int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dns_record_changed'", accountID).Scan(&changed); err != nil {
		return nil, err
	}
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM domain_health_history").Scan(&history); err != nil {
		return nil, err
	}
	fmt.Printf("  dns_record_changed events: %d (expected %d); health history rows: %d\n", changed, dnsBenchChanged, history)
	if changed != dnsBenchChanged {
		return nil, fmt.Errorf("expected %d dns_record_changed events, got %d", dnsBenchChanged, changed)
	}
	return ids, nil
}

// dnsRecommendationRounds re-checks every domain directly, without and
// with the recommendations recomputed, and prints what they cost.
func dnsRecommendationRounds(ctx context.Context, env *benchEnv, ids []uuid.UUID, checker *domains.Checker) error {
	// Rounds 3 and 4: the same re-checks (nothing changed), called
	// directly at the workers' concurrency, without and with the DNS
	// recommendations recomputed after each check, to show what the
	// recomputation costs.
	r3, err := checkRound(ctx, env, ids, checker.CheckAndApply)
	if err != nil {
		return err
	}
	fmt.Printf("round 3 (re-checks, no recommendations):   %s\n", r3)
	r4, err := checkRound(ctx, env, ids, checker.Run)
	if err != nil {
		return err
	}
	fmt.Printf("round 4 (re-checks with recommendations): %s\n", r4)
	rate := func(r dnsRound) float64 { return float64(r.n) / r.elapsed.Seconds() }
	fmt.Printf("  with recommendations: %.2f of the rate without them\n", rate(r4)/rate(r3))
	return nil
}

func createBenchDomains(ctx context.Context, baseURL, key string) error {
	client := newHTTPClient(16)
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= dnsBenchDomains || ctx.Err() != nil {
					return
				}
				body, _ := json.Marshal(map[string]any{"domain": fmt.Sprintf("d%d.bench", i), "tags": []string{"bench"}})
				req, _ := http.NewRequestWithContext(ctx, "POST", baseURL+"/api/accounts/me/domains", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("creating domain %d: status %d", i, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func benchDomainIDs(ctx context.Context, env *benchEnv) ([]uuid.UUID, error) {
	rows, err := env.Pool.Query(ctx, "SELECT id FROM domains ORDER BY id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// checkRound runs check on every domain of ids, dnsBenchConcurrency at a
// time, as the check workers would.
func checkRound(ctx context.Context, env *benchEnv, ids []uuid.UUID, check func(context.Context, dbsqlc.Domain, func(context.Context, pgx.Tx) error) (*domains.Run, error)) (dnsRound, error) {
	q := dbsqlc.New()
	rows := make([]dbsqlc.Domain, len(ids))
	for i, id := range ids {
		row, err := q.DomainGetByID(ctx, env.Pool, id)
		if err != nil {
			return dnsRound{}, err
		}
		rows[i] = row
	}
	durations := make([]time.Duration, len(rows))
	errs := make([]error, len(rows))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range dnsBenchConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rows) {
					return
				}
				t0 := time.Now()
				_, errs[i] = check(ctx, rows[i], nil)
				durations[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return dnsRound{}, err
	}
	slices.Sort(durations)
	return dnsRound{n: len(rows), elapsed: elapsed, p50: percentile(durations, 50), p99: percentile(durations, 99)}, nil
}

// waitJobs collects n finished jobs; a failed one is an error.
func waitJobs(ctx context.Context, ch <-chan *river.Event, n int) ([]*river.Event, error) {
	out := make([]*river.Event, 0, n)
	timeout := time.After(10 * time.Minute)
	for len(out) < n {
		select {
		case ev := <-ch:
			if ev.Job.Kind != (domains.CheckArgs{}).Kind() {
				continue
			}
			if ev.Kind == river.EventKindJobFailed {
				return nil, fmt.Errorf("check job %d failed: %v", ev.Job.ID, ev.Job.Errors)
			}
			out = append(out, ev)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("only %d of %d check jobs finished", len(out), n)
		}
	}
	return out, nil
}

type dnsRound struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	queries  float64
}

func jobRound(evs []*river.Event, elapsed time.Duration, queries int64) dnsRound {
	d := make([]time.Duration, len(evs))
	for i, ev := range evs {
		d[i] = ev.JobStats.RunDuration
	}
	slices.Sort(d)
	return dnsRound{n: len(evs), elapsed: elapsed, p50: percentile(d, 50), p99: percentile(d, 99), queries: float64(queries) / float64(len(evs))}
}

func (r dnsRound) String() string {
	return fmt.Sprintf("%7.0f checks/s  p50 %6.2f ms  p99 %6.2f ms  %5.1f DNS queries/domain  (%d domains in %.2f s)",
		float64(r.n)/r.elapsed.Seconds(), ms(r.p50), ms(r.p99), r.queries, r.n, r.elapsed.Seconds())
}

type directResult struct {
	rate     float64
	p50, p99 time.Duration
	queries  float64
}

func checkAllDirect(ctx context.Context, resolver dnscheck.Resolver, sts *http.Client, srv *dnstest.Server) directResult {
	q0 := srv.Queries()
	durations := make([]time.Duration, dnsBenchDomains)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range dnsBenchConcurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= dnsBenchDomains {
					return
				}
				t0 := time.Now()
				dnscheck.CheckAll(ctx, fmt.Sprintf("d%d.bench", i), dnscheck.Options{Resolver: resolver, HTTPClient: sts, CheckTimeout: domains.CheckBudget})
				durations[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(durations)
	return directResult{
		rate: float64(dnsBenchDomains) / elapsed.Seconds(),
		p50:  percentile(durations, 50), p99: percentile(durations, 99),
		queries: float64(srv.Queries()-q0) / dnsBenchDomains,
	}
}
