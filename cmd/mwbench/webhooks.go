package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	benchWebhookEvents  = 10_000
	benchEmitters       = 8   // producer connections emitting events
	benchWebhookWorkers = 200 // WEBHOOK_CONCURRENCY's default
	benchIdleSamples    = 200
)

// benchWebhooks measures webhook delivery end to end on one worker client
// configured as `mailwatch worker --queues=webhooks` is (MaxWorkers 200,
// FetchCooldown 10 ms, its own pool of DB_MAX_CONNS connections, 20 by
// default), next to River working 10,000 no-op jobs with the same settings
// on the same database:
//
//   - drain: 10,000 events queued first, then the worker started: the rate
//     of the delivery path alone;
//   - flow: 10,000 events emitted by 8 producers (one event per
//     transaction) while the worker runs: commit-to-receipt latency;
//   - idle: single events one at a time (River's notify path, not the poll).
func benchWebhooks(ctx context.Context, env *benchEnv) error {
	rc, err := startBenchReceiver()
	if err != nil {
		return err
	}
	defer rc.close()
	rc.pool = env.Pool
	account, err := benchSubscription(ctx, env, rc.url)
	if err != nil {
		return err
	}
	// The subscription is mid-rotation, as after POST .../secret/rotate:
	// every push is signed under two secrets.
	if err := benchRotate(ctx, env, account); err != nil {
		return err
	}
	workerPool, err := dbutil.NewPool(ctx, env.URL+os.Getenv("BENCH_WORKER_URL_SUFFIX"), 20)
	if err != nil {
		return err
	}
	defer workerPool.Close()
	deps, worker, err := newWebhookWorker(env, workerPool)
	if err != nil {
		return err
	}
	emitFor, err := newBenchEmitter(env)
	if err != nil {
		return err
	}
	emit := func(ctx context.Context) (uuid.UUID, time.Time, error) { return emitFor(ctx, account) }

	var res webhookResults
	// 1. Drain: events queued while no worker runs, then one worker client
	// started: the rate of the delivery path alone.
	res.drain, err = rc.runDrain(ctx, benchWebhookEvents, emit, func() error { return worker.Start(ctx) })
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	}()
	if err := res.measureWorker(ctx, env, rc, emit); err != nil {
		return err
	}
	res.noopDrain, res.noopFlow, err = benchNoop(ctx, env)
	if err != nil {
		return err
	}
	// The baselines of issue 17 (webhooks_baseline.go): a minimal River
	// worker pushing the same signed bytes, and two delivery workers.
	stopCtx, cancelStop := context.WithTimeout(ctx, 10*time.Second)
	_ = worker.Stop(stopCtx)
	cancelStop()
	if err := res.measureBaselines(ctx, env, rc, deps.WebhookClient, emit); err != nil {
		return err
	}
	res.print()
	fmt.Printf("  pushes carrying two signatures (a rotation in grace): %d\n", rc.twoSignatures.Load())
	return nil
}

// newWebhookWorker makes the worker client configured as `mailwatch worker
// --queues=webhooks` is, on pool, and the deps it works with.
func newWebhookWorker(env *benchEnv, pool *pgxpool.Pool) (jobs.Deps, *river.Client[pgx.Tx], error) {
	guard, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	if err != nil {
		return jobs.Deps{}, nil, err
	}
	keyring, err := secretbox.NewKeyring(make([]byte, 32))
	if err != nil {
		return jobs.Deps{}, nil, err
	}
	deps := jobs.Deps{
		Pool: pool, Logger: env.Logger, Keyring: keyring,
		WebhookClient: webhook.NewClient(guard, webhook.ClientOptions{MaxIdleConnsPerHost: benchWebhookWorkers}),
	}
	worker, err := jobs.NewClient(deps, jobs.Options{
		Concurrency: 100, WebhookConcurrency: benchWebhookWorkers, Queues: []string{queues.Webhooks},
		FetchCooldown: 10 * time.Millisecond,
	})
	if err != nil {
		return jobs.Deps{}, nil, err
	}
	return deps, worker, nil
}

// newBenchEmitter answers a function that emits one receiver_message_received
// event of an account in its own transaction, and when it committed.
func newBenchEmitter(env *benchEnv) (func(ctx context.Context, account uuid.UUID) (uuid.UUID, time.Time, error), error) {
	// The producers' client inserts only, as the API's does.
	producer, err := jobs.NewClient(jobs.Deps{Pool: env.Pool, Logger: env.Logger}, jobs.Options{FetchCooldown: 10 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	emitter := &events.Emitter{River: producer}
	return func(ctx context.Context, account uuid.UUID) (uuid.UUID, time.Time, error) {
		ev, err := dbutil.WithTxV(ctx, env.Pool, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Event, error) {
			return emitter.Emit(ctx, tx, events.Event{
				AccountID: account, Type: events.TypeReceiverMessageReceived,
				Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email", "subject": "benchmark"},
			})
		})
		return ev.ID, time.Now(), err
	}, nil
}

// webhookResults are the figures benchWebhooks prints.
type webhookResults struct {
	drain, load, idle   flowResult
	notDelivered        int
	noopDrain, noopFlow flowResult
	minimal             flowResult
	oneProc, twoProcs   flowResult
}

// measureWorker runs the flow and idle phases on the running worker, then
// counts the deliveries not yet marked delivered.
func (res *webhookResults) measureWorker(ctx context.Context, env *benchEnv, rc *benchReceiver, emit emitFunc) error {
	// 2. Flow: events emitted by the producers while the worker runs:
	// commit-to-receipt latency under load.
	if err := rc.settle(ctx); err != nil {
		return err
	}
	var err error
	res.load, err = rc.runMeasured(ctx, benchWebhookEvents, emit)
	if err != nil {
		return err
	}
	// 3. Idle: one event at a time.
	if err := rc.settle(ctx); err != nil {
		return err
	}
	res.idle, err = rc.runIdle(ctx, benchIdleSamples, emit)
	if err != nil {
		return err
	}
	// A push reaches the receiver a moment before its row says delivered.
	for range 50 {
		if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'").Scan(&res.notDelivered); err != nil {
			return err
		}
		if res.notDelivered == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// measureBaselines runs the minimal push worker, then one and two worker
// processes of the built binary.
func (res *webhookResults) measureBaselines(ctx context.Context, env *benchEnv, rc *benchReceiver, client *http.Client, emit emitFunc) error {
	var err error
	res.minimal, err = benchMinimalPush(ctx, env, rc, client, benchWebhookEvents)
	if err != nil {
		return err
	}
	// One, then two `mailwatch worker --queues=webhooks` processes of the
	// built binary, each with its own pool of DB_MAX_CONNS.
	if err := rc.settle(ctx); err != nil {
		return err
	}
	res.oneProc, err = benchWorkerProcesses(ctx, env, rc, emit, 1, benchWebhookEvents)
	if err != nil {
		return err
	}
	if err := rc.settle(ctx); err != nil {
		return err
	}
	res.twoProcs, err = benchWorkerProcesses(ctx, env, rc, emit, 2, benchWebhookEvents)
	return err
}

func (res *webhookResults) print() {
	drain, load, idle, noopDrain, noopFlow := res.drain, res.load, res.idle, res.noopDrain, res.noopFlow
	minimal, oneProc, twoProcs := res.minimal, res.oneProc, res.twoProcs
	fmt.Printf("webhooks: 1 subscription -> local receiver; one worker client (MaxWorkers %d, FetchCooldown 10 ms, pool %d = DB_MAX_CONNS); %d producers, one event per transaction\n",
		benchWebhookWorkers, benchWorkerConns(), benchEmitters)
	fmt.Printf("  drain %d queued:  webhook deliveries %6.0f /s   River no-op jobs %6.0f /s   ratio %.2f\n",
		benchWebhookEvents, drain.rate(), noopDrain.rate(), drain.rate()/noopDrain.rate())
	fmt.Printf("  flow %d emitted:  webhook deliveries %6.0f /s (emitted %5.0f /s)  commit->receipt p50 %7.2f ms  p99 %7.2f ms\n",
		benchWebhookEvents, load.rate(), load.emitRate(), ms(load.p50), ms(load.p99))
	fmt.Printf("                        River no-op jobs   %6.0f /s (inserted %4.0f /s) commit->worked  p50 %7.2f ms  p99 %7.2f ms\n",
		noopFlow.rate(), noopFlow.emitRate(), ms(noopFlow.p50), ms(noopFlow.p99))
	fmt.Printf("  idle, one at a time:    commit->receipt p50 %7.2f ms  p99 %7.2f ms  (%d events)\n", ms(idle.p50), ms(idle.p99), benchIdleSamples)
	fmt.Printf("  drain %d queued:  webhook deliveries %6.0f /s   minimal River push worker (same signed push, no bookkeeping) %6.0f /s   ratio %.2f\n",
		benchWebhookEvents, drain.rate(), minimal.rate(), drain.rate()/minimal.rate())
	fmt.Printf("  drain %d queued, first to last push (start-up left out): delivery client in this process %6.0f /s, minimal push worker in this process %6.0f /s\n",
		benchWebhookEvents, drain.rateFromFirst(), minimal.rateFromFirst())
	fmt.Printf("    `mailwatch worker --queues=webhooks` processes of the built binary: one %6.0f /s (%.2f of the minimal worker);  two %6.0f /s = %.2fx one\n",
		oneProc.rateFromFirst(), oneProc.rateFromFirst()/minimal.rateFromFirst(), twoProcs.rateFromFirst(), twoProcs.rateFromFirst()/oneProc.rateFromFirst())
	fmt.Printf("  rows not delivered at the end: %d\n", res.notDelivered)
}

// benchRotate puts the account's subscriptions in a rotation's grace: a
// second secret, sealed as a rotation leaves it, signs beside the first
// for a day.
func benchRotate(ctx context.Context, env *benchEnv, account uuid.UUID) error {
	keyring, err := secretbox.NewKeyring(make([]byte, 32))
	if err != nil {
		return err
	}
	rows, err := dbsqlc.New().SubscriptionListByAccount(ctx, env.Pool, dbsqlc.SubscriptionListByAccountParams{AccountID: account, Max: 100})
	if err != nil {
		return err
	}
	for _, sub := range rows {
		ct, keyID, err := keyring.Seal([]byte(webhook.GenerateSecret()), sub.ID[:])
		if err != nil {
			return err
		}
		if _, err := env.Pool.Exec(ctx, `UPDATE event_subscriptions SET previous_secret_ciphertext = $2,
			previous_secret_key_id = $3, previous_secret_expires_at = now() + interval '1 day' WHERE id = $1`, sub.ID, ct, keyID); err != nil {
			return err
		}
	}
	return nil
}

// benchSubscription creates an account subscribed to every event at url.
func benchSubscription(ctx context.Context, env *benchEnv, url string) (uuid.UUID, error) {
	return benchSubscriptionFor(ctx, env, url, "bench-webhooks@example.com")
}

// benchSubscriptionFor is benchSubscription for an account of that email.
func benchSubscriptionFor(ctx context.Context, env *benchEnv, url, email string) (uuid.UUID, error) {
	account := uuid.Must(uuid.NewV7())
	if _, err := env.Pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, email); err != nil {
		return account, err
	}
	keyring, err := secretbox.NewKeyring(make([]byte, 32))
	if err != nil {
		return account, err
	}
	p := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: account, URL: url}
	if p.SecretCiphertext, p.SecretKeyID, err = keyring.Seal([]byte(webhook.GenerateSecret()), p.ID[:]); err != nil {
		return account, err
	}
	_, err = dbsqlc.New().SubscriptionInsert(ctx, env.Pool, p)
	return account, err
}

// benchReceiver is the subscriber: it notes when each event's push arrives.
type benchReceiver struct {
	url     string
	srv     *http.Server
	mu      sync.Mutex
	waiting map[uuid.UUID]chan time.Time
	pool    *pgxpool.Pool // for settle
	// twoSignatures counts the pushes signed under two secrets.
	twoSignatures atomic.Int64
}

func startBenchReceiver() (*benchReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &benchReceiver{url: "http://" + ln.Addr().String() + "/hook", waiting: map[uuid.UUID]chan time.Time{}}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

func (rc *benchReceiver) close() { _ = rc.srv.Close() }

func (rc *benchReceiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	var body struct {
		Data struct {
			ID uuid.UUID `json:"id"`
		} `json:"data"`
	}
	if strings.Count(r.Header.Get("webhook-signature"), "v1,") == 2 {
		rc.twoSignatures.Add(1)
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		w.WriteHeader(400)
		return
	}
	select {
	case rc.expect(body.Data.ID) <- at:
	default: // a duplicate push: the first one counts
	}
	w.WriteHeader(204)
}

// expect returns the channel an event's push is announced on. The push may
// arrive before the producer registers (it only learns the id at commit),
// so whichever side comes first creates it.
func (rc *benchReceiver) expect(id uuid.UUID) chan time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ch, ok := rc.waiting[id]
	if !ok {
		ch = make(chan time.Time, 1)
		rc.waiting[id] = ch
	}
	return ch
}

type emitFunc func(ctx context.Context) (uuid.UUID, time.Time, error)

// flowResult is one measured run.
type flowResult struct {
	n              int
	start          time.Time
	lastEmit       time.Time
	lastDone       time.Time
	firstDone      time.Time // runDrain: the first push to arrive
	p50, p99       time.Duration
	latenciesTaken int
}

func (r flowResult) rate() float64     { return float64(r.n) / r.lastDone.Sub(r.start).Seconds() }
func (r flowResult) emitRate() float64 { return float64(r.n) / r.lastEmit.Sub(r.start).Seconds() }

// rateFromFirst is a drain's rate from its first push to its last, leaving
// out the time a worker took to start.
func (r flowResult) rateFromFirst() float64 {
	return float64(r.n-1) / r.lastDone.Sub(r.firstDone).Seconds()
}

// runDrain emits n events before calling start (which starts the worker),
// then waits for every push: the rate is n over the time from start to the
// last receipt.
func (rc *benchReceiver) runDrain(ctx context.Context, n int, emit emitFunc, start func() error) (flowResult, error) {
	ids := make(chan uuid.UUID, n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range benchEmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				id, _, err := emit(ctx)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	if firstErr != nil {
		return flowResult{}, firstErr
	}
	if err := rc.settle(ctx); err != nil {
		return flowResult{}, err
	}
	t0 := time.Now()
	if err := start(); err != nil {
		return flowResult{}, err
	}
	var first, last time.Time
	for id := range ids {
		select {
		case at := <-rc.expect(id):
			if at.After(last) {
				last = at
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
		case <-time.After(2 * time.Minute):
			return flowResult{}, fmt.Errorf("push of event %s never arrived", id)
		}
	}
	return flowResult{n: n, start: t0, lastDone: last, firstDone: first}, nil
}

// settle vacuums the tables both kinds of job work on before a measured
// phase, as autovacuum would have in a service running for a while, so
// that no phase pays for the dead rows of the one before it.
func (rc *benchReceiver) settle(ctx context.Context) error { return settleTables(ctx, rc.pool) }

func settleTables(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, "VACUUM (ANALYZE) river_job, webhook_deliveries, webhook_delivery_attempts, events")
	if err != nil {
		return fmt.Errorf("error vacuuming before a phase: %w", err)
	}
	return nil
}

// runMeasured emits n events from benchEmitters producers and waits for
// every push.
func (rc *benchReceiver) runMeasured(ctx context.Context, n int, emit emitFunc) (flowResult, error) {
	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
		lastEmit  time.Time
		lastDone  time.Time
		firstErr  error
		wg        sync.WaitGroup
		waiters   sync.WaitGroup
	)
	start := time.Now()
	for range benchEmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				id, committed, err := emit(ctx)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				ch := rc.expect(id)
				waiters.Add(1)
				go func() {
					defer waiters.Done()
					select {
					case at := <-ch:
						mu.Lock()
						latencies = append(latencies, at.Sub(committed))
						if at.After(lastDone) {
							lastDone = at
						}
						mu.Unlock()
					case <-time.After(2 * time.Minute):
					case <-ctx.Done():
					}
				}()
				mu.Lock()
				if committed.After(lastEmit) {
					lastEmit = committed
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	waiters.Wait()
	if firstErr != nil {
		return flowResult{}, firstErr
	}
	if len(latencies) != n {
		return flowResult{}, fmt.Errorf("only %d of %d pushes arrived", len(latencies), n)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return flowResult{n: n, start: start, lastEmit: lastEmit, lastDone: lastDone,
		p50: percentile(latencies, 50), p99: percentile(latencies, 99), latenciesTaken: len(latencies)}, nil
}

// runIdle emits n events one at a time, each after the previous arrived.
func (rc *benchReceiver) runIdle(ctx context.Context, n int, emit emitFunc) (flowResult, error) {
	latencies := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(20 * time.Millisecond)
		id, committed, err := emit(ctx)
		if err != nil {
			return flowResult{}, err
		}
		select {
		case at := <-rc.expect(id):
			latencies = append(latencies, at.Sub(committed))
		case <-time.After(30 * time.Second):
			return flowResult{}, fmt.Errorf("push of event %s never arrived", id)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return flowResult{n: n, p50: percentile(latencies, 50), p99: percentile(latencies, 99)}, nil
}

// noopArgs is a job that does nothing: River's own ceiling.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done func(id int64)
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	w.done(job.ID)
	return nil
}

// benchNoop inserts benchWebhookEvents no-op jobs from benchEmitters
// producers (one job per transaction, like an event) and measures River
// working them with the webhook worker's configuration.
func benchNoop(ctx context.Context, env *benchEnv) (drain, flow flowResult, err error) {
	workerPool, err := dbutil.NewPool(ctx, env.URL, 20)
	if err != nil {
		return drain, flow, err
	}
	defer workerPool.Close()
	runs := &noopRuns{waiting: map[int64]chan time.Time{}}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{done: func(id int64) { runs.chanFor(id) <- time.Now() }})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	worker, err := river.NewClient(riverpgxv5.New(workerPool), &river.Config{
		Logger: logger, Workers: workers, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond,
		Queues: map[string]river.QueueConfig{"bench_noop": {MaxWorkers: benchWebhookWorkers}},
	})
	if err != nil {
		return drain, flow, err
	}
	producer, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{Logger: logger, FetchCooldown: 10 * time.Millisecond})
	if err != nil {
		return drain, flow, err
	}
	drain, err = runs.drain(ctx, env, producer, worker)
	if err != nil {
		return drain, flow, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	}()
	flow, err = runs.flow(ctx, env, producer)
	if err != nil {
		return drain, flow, err
	}
	return drain, flow, nil
}

// noopRuns hands out, per no-op job, the channel its run is reported on.
type noopRuns struct {
	mu      sync.Mutex
	waiting map[int64]chan time.Time
}

func (n *noopRuns) chanFor(id int64) chan time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.waiting[id]
	if !ok {
		ch = make(chan time.Time, 1)
		n.waiting[id] = ch
	}
	return ch
}

// drain queues benchWebhookEvents jobs (InsertMany, 1,000 per call), then
// starts the worker and waits for every job to run.
func (n *noopRuns) drain(ctx context.Context, env *benchEnv, producer, worker *river.Client[pgx.Tx]) (flowResult, error) {
	queued := make([]int64, 0, benchWebhookEvents)
	for len(queued) < benchWebhookEvents {
		batch := make([]river.InsertManyParams, 1000)
		for i := range batch {
			batch[i] = river.InsertManyParams{Args: noopArgs{N: 1}, InsertOpts: &river.InsertOpts{Queue: "bench_noop"}}
		}
		res, err := producer.InsertMany(ctx, batch)
		if err != nil {
			return flowResult{}, err
		}
		for _, r := range res {
			queued = append(queued, r.Job.ID)
		}
	}
	if err := settleTables(ctx, env.Pool); err != nil {
		return flowResult{}, err
	}
	t0 := time.Now()
	if err := worker.Start(ctx); err != nil {
		return flowResult{}, err
	}
	var last time.Time
	for _, id := range queued {
		select {
		case at := <-n.chanFor(id):
			if at.After(last) {
				last = at
			}
		case <-time.After(2 * time.Minute):
			return flowResult{}, fmt.Errorf("no-op job %d never ran", id)
		}
	}
	return flowResult{n: benchWebhookEvents, start: t0, lastDone: last}, nil
}

// flow inserts benchWebhookEvents jobs from benchEmitters producers, one
// per transaction, while the worker runs, and measures commit to run.
func (n *noopRuns) flow(ctx context.Context, env *benchEnv, producer *river.Client[pgx.Tx]) (flowResult, error) {
	insert := func(ctx context.Context, pool *pgxpool.Pool) (int64, time.Time, error) {
		id, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			res, err := producer.InsertTx(ctx, tx, noopArgs{N: 1}, &river.InsertOpts{Queue: "bench_noop"})
			if err != nil {
				return 0, err
			}
			return res.Job.ID, nil
		})
		return id, time.Now(), err
	}
	var (
		next      atomic.Int64
		rmu       sync.Mutex
		latencies []time.Duration
		lastEmit  time.Time
		lastDone  time.Time
		firstErr  error
		wg        sync.WaitGroup
		waiters   sync.WaitGroup
	)
	start := time.Now()
	for range benchEmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= benchWebhookEvents {
				id, committed, err := insert(ctx, env.Pool)
				if err != nil {
					rmu.Lock()
					firstErr = err
					rmu.Unlock()
					return
				}
				ch := n.chanFor(id)
				waiters.Add(1)
				go func() {
					defer waiters.Done()
					select {
					case at := <-ch:
						rmu.Lock()
						latencies = append(latencies, at.Sub(committed))
						if at.After(lastDone) {
							lastDone = at
						}
						rmu.Unlock()
					case <-time.After(2 * time.Minute):
					}
				}()
				rmu.Lock()
				if committed.After(lastEmit) {
					lastEmit = committed
				}
				rmu.Unlock()
			}
		}()
	}
	wg.Wait()
	waiters.Wait()
	if firstErr != nil {
		return flowResult{}, firstErr
	}
	if len(latencies) != benchWebhookEvents {
		return flowResult{}, fmt.Errorf("only %d of %d no-op jobs ran", len(latencies), benchWebhookEvents)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return flowResult{n: benchWebhookEvents, start: start, lastEmit: lastEmit, lastDone: lastDone,
		p50: percentile(latencies, 50), p99: percentile(latencies, 99)}, nil
}

// benchWorkerConns is the worker pool's size (DB_MAX_CONNS, default 20).
func benchWorkerConns() int {
	if n, err := strconv.Atoi(os.Getenv("DB_MAX_CONNS")); err == nil && n > 1 {
		return n
	}
	return 20
}
