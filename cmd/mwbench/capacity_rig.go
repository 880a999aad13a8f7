package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	capacityPushSolo = 4000 // events drained by one worker process alone
	// The mixed steps' generators are an open loop: each needs enough calls
	// in flight that its own concurrency never caps what it offers when the
	// machine slows every call down (a provider, too, sends concurrently).
	capacityIngressConns = 128 // HTTP connections posting provider webhooks
	capacityEmitConns    = 48  // goroutines emitting events, one per transaction
	capacityCheckConns   = 16  // goroutines inserting check jobs
	capacityGenConns     = capacityEmitConns + capacityCheckConns
	capacityAccounts     = 20 // subscribed accounts the events are spread over
)

// capacityRig is every kind of work of the capacity bench, set up once: the
// API with the provider ingress, the normalisation worker, the webhook
// receiver and a `mailwatch worker --queues=webhooks` process, the check
// worker against the loopback DNS server, and the solo rate of each
// measured in this run. As in production, the API and the worker have a
// pool of DB_MAX_CONNS connections each (the normalisation and check
// workers are one worker process's queues, so they share theirs); the load
// generators use the bench's own pool.
type capacityRig struct {
	env        *benchEnv
	apiPool    *pgxpool.Pool
	workerPool *pgxpool.Pool
	genPool    *pgxpool.Pool         // the generators': emitting events, inserting checks
	scheduler  *river.Client[pgx.Tx] // inserts check jobs, as the periodic scheduler does
	api        *apiServer
	dns        *dnstest.Server
	dnsWorker  *river.Client[pgx.Tx]
	domainIDs  []uuid.UUID
	checks     *checkMeter
	feed       *signedFeed
	normWorker *river.Client[pgx.Tx]
	rc         *benchReceiver
	emit       emitFunc
	cleanup    []func()

	soloIngress, soloNormalise, soloEmit, soloPush, soloCheck float64
}

func (r *capacityRig) close() {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
}

// stopClient stops a River client, giving its running jobs 30 s.
func stopClient(c *river.Client[pgx.Tx]) func() {
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	}
}

// newCapacityRig builds the rig: the dns bench's zone, domains (created
// through the API, each queuing its first check) and check worker, not yet
// started; the providers bench's SendGrid provider and signed feed; the
// webhooks bench's receiver, subscription and emitter.
func newCapacityRig(ctx context.Context, env *benchEnv) (*capacityRig, error) {
	r := &capacityRig{env: env, checks: &checkMeter{}}
	var err error
	if r.dns, err = dnstest.NewServer(dnsBenchZone(dnsBenchDomains)); err != nil {
		return r, err
	}
	r.cleanup = append(r.cleanup, func() { _ = r.dns.Close() })
	resolver := dnscheck.NewClient(r.dns.Addr(), 2*time.Second)
	sts := &http.Client{Transport: stsPolicyTransport{}}
	if r.apiPool, err = dbutil.NewPool(ctx, env.URL, benchWorkerConns()); err != nil {
		return r, err
	}
	r.cleanup = append(r.cleanup, r.apiPool.Close)
	if r.workerPool, err = dbutil.NewPool(ctx, env.URL, benchWorkerConns()); err != nil {
		return r, err
	}
	r.cleanup = append(r.cleanup, r.workerPool.Close)
	if r.genPool, err = dbutil.NewPool(ctx, env.URL, capacityGenConns); err != nil {
		return r, err
	}
	r.cleanup = append(r.cleanup, r.genPool.Close)
	if r.scheduler, err = jobs.NewClient(jobs.Deps{Pool: r.genPool, Logger: env.Logger}, jobs.Options{FetchCooldown: 10 * time.Millisecond}); err != nil {
		return r, err
	}
	if r.api, err = env.startAPI(ctx, r.apiPool, func(d *api.Deps) { d.Resolver = resolver; d.MTASTSClient = sts }); err != nil {
		return r, err
	}
	r.cleanup = append(r.cleanup, r.api.close)
	stamp := time.Now().UnixNano()
	checkAccount, checkKey, err := createAccount(ctx, r.api.BaseURL, fmt.Sprintf("capacity-dns-%d@example.com", stamp))
	if err != nil {
		return r, err
	}
	if err := setBenchPlan(ctx, env, checkAccount); err != nil {
		return r, err
	}
	if err := createBenchDomains(ctx, r.api.BaseURL, checkKey); err != nil {
		return r, err
	}
	if r.domainIDs, err = benchDomainIDs(ctx, env); err != nil {
		return r, err
	}
	if _, r.dnsWorker, err = newDNSWorker(env, r.workerPool, resolver, sts); err != nil {
		return r, err
	}
	events, cancel := r.dnsWorker.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}, ChanSize: 100_000,
	})
	meterCtx, stopMeter := context.WithCancel(ctx)
	go r.checks.consume(meterCtx, events)
	r.cleanup = append(r.cleanup, stopMeter, cancel)
	return r, r.setupProvidersAndPushes(ctx)
}

// setupProvidersAndPushes adds the provider account and its signed feed,
// and the subscribed account, receiver and emitter.
func (r *capacityRig) setupProvidersAndPushes(ctx context.Context) error {
	_, key, err := createAccount(ctx, r.api.BaseURL, fmt.Sprintf("capacity-providers-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	priv, provID, err := setupBenchProvider(ctx, r.api.BaseURL, key)
	if err != nil {
		return err
	}
	r.feed = &signedFeed{signer: &sendgridSigner{priv: priv}, url: r.api.BaseURL + "/api/webhooks/providers/" + provID}
	if r.normWorker, err = newProviderWorker(r.env, r.workerPool); err != nil {
		return err
	}
	if r.rc, err = startBenchReceiver(); err != nil {
		return err
	}
	r.cleanup = append(r.cleanup, r.rc.close)
	r.rc.pool = r.env.Pool
	// Events are spread over several accounts, as a fleet's are: each
	// account's events are counted in its own hourly rollup row, which one
	// transaction at a time holds until it commits.
	accounts := make([]uuid.UUID, capacityAccountCount())
	for i := range accounts {
		if accounts[i], err = benchSubscriptionFor(ctx, r.env, r.rc.url, fmt.Sprintf("capacity-webhooks-%d@example.com", i)); err != nil {
			return err
		}
	}
	genEnv := *r.env
	genEnv.Pool = r.genPool
	emitFor, err := newBenchEmitter(&genEnv)
	if err != nil {
		return err
	}
	var next atomic.Int64
	r.emit = func(ctx context.Context) (uuid.UUID, time.Time, error) {
		return emitFor(ctx, accounts[int(next.Add(1))%len(accounts)])
	}
	return nil
}

// measureSolo measures each kind alone, in turn, on this machine now:
// checks (the domains' first checks, queued at their creation), ingress
// (closed loop at the providers bench's 32 connections for soloD), the
// normalisation of what the ingress stored, and pushes (capacityPushSolo
// queued events drained by one worker process). Each worker keeps running
// afterwards, idle, for the mixed steps.
func (r *capacityRig) measureSolo(ctx context.Context, soloD time.Duration) error {
	start := time.Now()
	if err := r.dnsWorker.Start(ctx); err != nil {
		return err
	}
	r.cleanup = append(r.cleanup, stopClient(r.dnsWorker))
	if !r.checks.waitCompleted(ctx, int64(len(r.domainIDs)), 5*time.Minute) {
		return fmt.Errorf("solo checks: only %d of %d first checks completed in 5 minutes", r.checks.completed.Load(), len(r.domainIDs))
	}
	r.soloCheck = float64(len(r.domainIDs)) / time.Since(start).Seconds()
	r.checks.take()

	warm := runLoad(ctx, benchProviderConns, time.Second, r.feed.post) // warm up, signing inline
	if err := r.feed.presign(int(warm.RPS()*2*soloD.Seconds()) + 5000); err != nil {
		return err
	}
	ingress := runLoad(ctx, benchProviderConns, soloD, r.feed.post)
	r.soloIngress = ingress.RPS()
	if err := r.soloNormalisation(ctx); err != nil {
		return err
	}
	if err := settleTables(ctx, r.env.Pool); err != nil {
		return err
	}
	var emitted emitSpan
	push, err := r.rc.runDrain(ctx, capacityPushSolo, emitted.timed(r.emit), func() error {
		stop, err := startWorkerProcesses(ctx, r.env, 1, capacityWorkerEnv()...)
		r.cleanup = append(r.cleanup, stop)
		return err
	})
	if err != nil {
		return err
	}
	r.soloPush, r.soloEmit = push.rateFromFirst(), emitted.rate(capacityPushSolo)
	fmt.Printf("solo      checks %.0f/s (%d first checks)  ingress %.0f req/s (%s, %d connections)  normalisation %.0f events/s\n",
		r.soloCheck, len(r.domainIDs), r.soloIngress, soloD, benchProviderConns, r.soloNormalise)
	fmt.Printf("          events emitted %.0f/s (%d producers, one event per transaction, %d accounts)  pushes %.0f/s (one worker process, %d queued)\n",
		r.soloEmit, benchEmitters, capacityAccountCount(), r.soloPush, capacityPushSolo)
	return nil
}

// emitSpan times a run of emissions: from the first call to the last
// commit.
type emitSpan struct {
	mu          sync.Mutex
	first, last time.Time
}

func (s *emitSpan) timed(emit emitFunc) emitFunc {
	return func(ctx context.Context) (uuid.UUID, time.Time, error) {
		s.mu.Lock()
		if s.first.IsZero() {
			s.first = time.Now()
		}
		s.mu.Unlock()
		id, at, err := emit(ctx)
		s.mu.Lock()
		if at.After(s.last) {
			s.last = at
		}
		s.mu.Unlock()
		return id, at, err
	}
}

func (s *emitSpan) rate(n int) float64 { return float64(n) / s.last.Sub(s.first).Seconds() }

// soloNormalisation starts the normalisation worker on the payloads the
// solo ingress stored and times it until none is left.
func (r *capacityRig) soloNormalisation(ctx context.Context) error {
	queued, err := unprocessedPayloads(ctx, r.env.Pool)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := r.normWorker.Start(ctx); err != nil {
		return err
	}
	r.cleanup = append(r.cleanup, stopClient(r.normWorker))
	left, err := waitPayloadsNormalised(ctx, r.env, 5*time.Minute)
	if err != nil {
		return err
	}
	if left > 0 {
		return fmt.Errorf("solo normalisation: %d of %d payloads left after 5 minutes", left, queued)
	}
	r.soloNormalise = float64(queued) / time.Since(start).Seconds()
	return nil
}

// waitPayloadsNormalised waits for no payload to be left unprocessed, for
// at most bound, and returns how many are left.
func waitPayloadsNormalised(ctx context.Context, env *benchEnv, bound time.Duration) (int, error) {
	until := time.Now().Add(bound)
	for {
		left, err := unprocessedPayloads(ctx, env.Pool)
		if err != nil || left == 0 || time.Now().After(until) {
			return left, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// capacityAccountCount is how many subscribed accounts the events are
// spread over (BENCH_CAPACITY_ACCOUNTS, default 20).
func capacityAccountCount() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_CAPACITY_ACCOUNTS")); err == nil && n > 0 {
		return n
	}
	return capacityAccounts
}

// capacityWorkerEnv lifts the per-account and per-host push bounds of the
// worker process, unless the environment sets them: the bench's one
// account to one receiver would otherwise measure the bound, not the
// worker (as the webhooks bench's baselines do).
func capacityWorkerEnv() []string {
	var out []string
	for _, name := range []string{"WEBHOOK_ACCOUNT_CONCURRENCY", "WEBHOOK_HOST_CONCURRENCY"} {
		if os.Getenv(name) == "" {
			out = append(out, fmt.Sprintf("%s=%d", name, benchWebhookWorkers))
		}
	}
	return out
}
