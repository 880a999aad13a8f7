package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

const (
	// fairnessEvery is the victim's pace: one event per interval.
	fairnessEvery = 50 * time.Millisecond
	// fairnessTarpitSubs and fairnessTarpitEvents are the tarpitting
	// tenant's subscriptions to its slow endpoint and its events (as many
	// emails to its own receiver): 500 pushes of 15 s each.
	fairnessTarpitSubs   = 5
	fairnessTarpitEvents = 100
)

// benchFairness measures what one tenant's slow endpoint costs another
// tenant. One `mailwatch worker --queues=webhooks` process of the built
// binary (MAILWATCH_BIN; WEBHOOK_CONCURRENCY 200, the per-account and
// per-host bounds from the environment or their defaults) pushes a victim
// account's events, one every 50 ms for BENCH_SECONDS, to a fast local
// receiver, twice in one run:
//
//   - alone;
//   - right after a tarpitting account emitted 100 events to its five
//     subscriptions of an endpoint that never answers (each push lasts the
//     client's 15 s timeout): 500 slow pushes queued ahead of the victim's.
//
// It prints the victim's commit-to-receipt p50, p99 and maximum of both
// phases side by side, and the most pushes of the tarpitting account held
// at once. Run it
// with a binary built before the fairness bounds to see the difference.
func benchFairness(ctx context.Context, env *benchEnv) error {
	rc, err := startBenchReceiver()
	if err != nil {
		return err
	}
	defer rc.close()
	rc.pool = env.Pool
	tp, err := startTarpit()
	if err != nil {
		return err
	}
	defer tp.close()
	victim, err := benchTenant(ctx, env, "victim", rc.url)
	if err != nil {
		return err
	}
	subs := make([]string, fairnessTarpitSubs)
	for i := range subs {
		subs[i] = tp.url
	}
	attacker, err := benchTenant(ctx, env, "tarpit", subs...)
	if err != nil {
		return err
	}
	emit, err := newBenchEmitter(env)
	if err != nil {
		return err
	}

	bin, stopWorker, err := startFairnessWorker(ctx, env, tp)
	if err != nil {
		return err
	}
	defer stopWorker()
	// Warm up: the worker is working once one push arrived.
	id, _, err := emit(ctx, victim)
	if err != nil {
		return err
	}
	select {
	case <-rc.expect(id):
	case <-time.After(time.Minute):
		return fmt.Errorf("the worker process never pushed (is %s built?)", bin)
	}

	alone, err := victimFlow(ctx, rc, func(ctx context.Context) (uuid.UUID, time.Time, error) { return emit(ctx, victim) })
	if err != nil {
		return err
	}
	for range fairnessTarpitEvents {
		if _, _, err := emit(ctx, attacker); err != nil {
			return err
		}
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	held := make(chan int, 1)
	go func() { held <- sampleOpenAttempts(sampleCtx, env, attacker) }()
	beside, err := victimFlow(ctx, rc, func(ctx context.Context) (uuid.UUID, time.Time, error) { return emit(ctx, victim) })
	stopSampling()
	mostHeld := <-held
	if err != nil {
		return err
	}
	printFairness(alone, beside, mostHeld)
	return nil
}

// startFairnessWorker starts a `mailwatch worker --queues=webhooks` process
// of the built binary (MAILWATCH_BIN, default bin/mailwatch) and answers its
// name and a function that releases the tarpit's held pushes and stops it.
func startFairnessWorker(ctx context.Context, env *benchEnv, tp *tarpit) (string, func(), error) {
	bin := os.Getenv("MAILWATCH_BIN")
	if bin == "" {
		bin = "bin/mailwatch"
	}
	cmd := benchWorkerCmd(ctx, env, bin)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return bin, nil, fmt.Errorf("error starting %s worker (scripts/bench builds it; MAILWATCH_BIN overrides): %w", bin, err)
	}
	stop := func() {
		tp.release() // held pushes end at once, so that the worker stops quickly
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() && logs.Len() > 0 {
			fmt.Fprintf(os.Stderr, "worker process:\n%s", logs.String())
		}
	}
	return bin, stop, nil
}

// printFairness prints the victim's figures alone and beside the tarpit.
func printFairness(alone, beside victimResult, mostHeld int) {
	fmt.Printf("fairness: one `mailwatch worker --queues=webhooks` (WEBHOOK_CONCURRENCY %d, WEBHOOK_ACCOUNT_CONCURRENCY %s, WEBHOOK_HOST_CONCURRENCY %s);\n",
		benchWebhookWorkers, envOr("WEBHOOK_ACCOUNT_CONCURRENCY", "default"), envOr("WEBHOOK_HOST_CONCURRENCY", "default"))
	fmt.Printf("  victim: one event every %s for %s to a local receiver; tarpit tenant: %d events x %d subscriptions of an endpoint that never answers (%d pushes of 15 s)\n",
		fairnessEvery, benchDuration(), fairnessTarpitEvents, fairnessTarpitSubs, fairnessTarpitEvents*fairnessTarpitSubs)
	fmt.Printf("  victim commit->receipt      alone        beside the tarpit\n")
	fmt.Printf("    p50               %10.2f ms   %10.2f ms\n", ms(alone.p50), ms(beside.p50))
	fmt.Printf("    p99               %10.2f ms   %10.2f ms\n", ms(alone.p99), ms(beside.p99))
	fmt.Printf("    max               %10.2f ms   %10.2f ms\n", ms(alone.max), ms(beside.max))
	fmt.Printf("    events            %10d      %10d\n", alone.n, beside.n)
	fmt.Printf("  tarpit tenant's pushes held over 1 s at once (open attempts, sampled every 100 ms): at most %d of %d workers\n", mostHeld, benchWebhookWorkers)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// victimResult is the victim's latencies over one phase.
type victimResult struct {
	n             int
	p50, p99, max time.Duration
}

// victimFlow emits one event every fairnessEvery for benchDuration and
// waits (up to 3 minutes each) for every push.
func victimFlow(ctx context.Context, rc *benchReceiver, emit emitFunc) (victimResult, error) {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		waiters   sync.WaitGroup
	)
	tick := time.NewTicker(fairnessEvery)
	defer tick.Stop()
	end := time.Now().Add(benchDuration())
	n := 0
	for time.Now().Before(end) {
		<-tick.C
		id, committed, err := emit(ctx)
		if err != nil {
			return victimResult{}, err
		}
		n++
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			select {
			case at := <-rc.expect(id):
				mu.Lock()
				latencies = append(latencies, at.Sub(committed))
				mu.Unlock()
			case <-time.After(3 * time.Minute):
			case <-ctx.Done():
			}
		}()
	}
	waiters.Wait()
	if len(latencies) != n {
		return victimResult{}, fmt.Errorf("only %d of the victim's %d pushes arrived", len(latencies), n)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return victimResult{n: n, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies[n-1]}, nil
}

// sampleOpenAttempts returns the most pushes of the account held for over
// a second (attempts started more than a second ago and not ended, as the
// worker records them) seen every 100 ms until ctx ends. A push waiting for
// a slot and put back lasts well under a second; one the tarpit holds,
// 15 s.
func sampleOpenAttempts(ctx context.Context, env *benchEnv, account uuid.UUID) int {
	most := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_delivery_attempts a
			JOIN webhook_deliveries d ON d.id = a.delivery_id
			WHERE d.account_id = $1 AND a.finished_at IS NULL AND a.started_at < now() - interval '1 second'`, account).Scan(&n); err == nil {
			most = max(most, n)
		}
		select {
		case <-ctx.Done():
			return most
		case <-tick.C:
		}
	}
}

// benchTenant creates an account (name@example.com) with one subscription
// to every event per URL.
func benchTenant(ctx context.Context, env *benchEnv, name string, urls ...string) (uuid.UUID, error) {
	account := uuid.Must(uuid.NewV7())
	if _, err := env.Pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, "bench-"+name+"@example.com"); err != nil {
		return account, err
	}
	keyring, err := secretbox.NewKeyring(make([]byte, 32))
	if err != nil {
		return account, err
	}
	for _, url := range urls {
		p := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: account, URL: url}
		if p.SecretCiphertext, p.SecretKeyID, err = keyring.Seal([]byte(webhook.GenerateSecret()), p.ID[:]); err != nil {
			return account, err
		}
		if _, err := dbsqlc.New().SubscriptionInsert(ctx, env.Pool, p); err != nil {
			return account, err
		}
	}
	return account, nil
}

// tarpit is the slow endpoint: it answers no request until the client
// gives up on it, or until released at the end of the bench.
type tarpit struct {
	url     string
	srv     *http.Server
	stop    chan struct{}
	release func()
}

func startTarpit() (*tarpit, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tp := &tarpit{url: "http://" + ln.Addr().String() + "/slow", stop: make(chan struct{})}
	tp.release = sync.OnceFunc(func() { close(tp.stop) })
	tp.srv = &http.Server{Handler: http.HandlerFunc(tp.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = tp.srv.Serve(ln) }()
	return tp, nil
}

func (tp *tarpit) serve(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-tp.stop:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func (tp *tarpit) close() {
	tp.release()
	_ = tp.srv.Close()
}
