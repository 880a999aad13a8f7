package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// The mix of the capacity bench's first step, as shares of each kind's solo
// rate: one stream of provider events (its ingress and its normalisation
// together), one stream of events pushed to subscribers (their emission and
// their delivery together) and domain checks. They sum to 0.7, the model's
// limit; the second step scales them to 1.0.
const (
	capacityShareProviders = 0.35
	capacitySharePushes    = 0.20
	capacityShareChecks    = 0.15
	capacityLimit          = 0.7
)

// benchCapacity checks the capacity model of docs/capacity.md, which
// predicts that a mix fits while sum(load / solo rate) < 0.7 from rates
// each measured alone. It measures each kind's solo rate in this run
// (capacityRig.measureSolo), then runs them together for BENCH_SECONDS at
// loads whose predicted sum is 0.7, then 1.0, and reports per kind what was
// offered and carried, the backlog left and the latencies: the model holds
// when no kind's backlog grew beyond one second of its load.
// BENCH_CAPACITY_ONLY=providers|pushes|checks offers that kind's load
// alone in each step (the others at zero), to tell a kind's own limit at
// that load from what the mix costs it.
func benchCapacity(ctx context.Context, env *benchEnv) error {
	d := benchDuration()
	soloD := min(max(d/2, 3*time.Second), 10*time.Second)
	fmt.Printf("load average %s (before)\n", loadAverage())
	rig, err := newCapacityRig(ctx, env)
	defer rig.close()
	if err != nil {
		return err
	}
	if err := rig.measureSolo(ctx, soloD); err != nil {
		return err
	}
	for _, sum := range []float64{capacityLimit, 1.0} {
		drained, err := rig.runStep(ctx, sum/capacityLimit, d)
		if err != nil {
			return err
		}
		if !drained {
			fmt.Println("the backlog did not drain: the next step is not run")
			break
		}
	}
	fmt.Printf("load average %s (after)\n", loadAverage())
	return nil
}

// capacityKind is one kind of work in a mixed step: its offered load and
// how its backlog (offered and not yet done, in units of its work) reads.
type capacityKind struct {
	name        string
	share, solo float64 // of the solo rate; the solo rate, per second
	pacer       *pacer  // what offered this kind's load, when it is the kind's own
	backlog     func(ctx context.Context) (int, error)
	achieved    float64
	endBacklog  int
	firstBehind time.Duration // when the backlog first passed one second of load; zero: never
	p50, p99    time.Duration
	latency     string // what p50 and p99 are of
	riverKind   string
}

func (k *capacityKind) load() float64 { return k.share * k.solo }

// runStep runs the mix at scale times the first step's shares for d, then
// waits (bounded) for every backlog to drain, and prints the step. It
// reports whether everything drained.
func (r *capacityRig) runStep(ctx context.Context, scale float64, d time.Duration) (bool, error) {
	// One stream of provider events is two kinds of work, the ingress and
	// the normalisation: its rate P spends P/I + P/N of the sum.
	only := os.Getenv("BENCH_CAPACITY_ONLY")
	on := func(kind string) float64 {
		if only == "" || only == kind {
			return scale
		}
		return 0
	}
	p := capacityShareProviders * on("providers") / (1/r.soloIngress + 1/r.soloNormalise)
	w := capacitySharePushes * on("pushes") / (1/r.soloEmit + 1/r.soloPush)
	c := capacityShareChecks * on("checks") * r.soloCheck
	if err := r.feed.presign(int(p*d.Seconds()) + 1000); err != nil {
		return false, err
	}
	if err := r.settle(ctx); err != nil {
		return false, err
	}
	loadBefore := loadAverage()
	completed0 := r.checks.completed.Load()
	watch := newPushWatch()
	var nextDomain atomic.Int64
	t0 := time.Now()
	client := newHTTPClient(capacityIngressConns)
	defer client.CloseIdleConnections()
	ingress := startPacer(ctx, p, d, capacityIngressConns, func(ctx context.Context) error { return r.feed.post(ctx, client) })
	pushes := startPacer(ctx, w, d, capacityEmitConns, watch.emitter(r.rc, r.emit))
	checks := startPacer(ctx, c, d, capacityCheckConns, func(ctx context.Context) error {
		id := r.domainIDs[int(nextDomain.Add(1)-1)%len(r.domainIDs)]
		_, err := r.scheduler.Insert(ctx, domains.CheckArgs{DomainID: id}, nil)
		return err
	})
	kinds := []*capacityKind{
		{name: "provider webhooks in", share: p / r.soloIngress, solo: r.soloIngress, pacer: ingress, latency: "HTTP request",
			backlog: func(context.Context) (int, error) { return ingress.outstanding(), nil }},
		{name: "provider events normalised", share: p / r.soloNormalise, solo: r.soloNormalise, latency: "stored to normalised",
			riverKind: providers.PayloadArgs{}.Kind(),
			backlog:   func(ctx context.Context) (int, error) { return unprocessedPayloads(ctx, r.env.Pool) }},
		{name: "events emitted", share: w / r.soloEmit, solo: r.soloEmit, pacer: pushes, latency: "one transaction",
			backlog: func(context.Context) (int, error) { return pushes.outstanding(), nil }},
		{name: "webhook pushes", share: w / r.soloPush, solo: r.soloPush, latency: "commit to receipt",
			riverKind: events.DeliveryKind, // emitted and not yet received
			backlog:   func(context.Context) (int, error) { return int(pushes.done.Load() - watch.arrived.Load()), nil }},
		{name: "domain checks", share: c / r.soloCheck, solo: r.soloCheck, pacer: checks, latency: "insert to completed",
			riverKind: domains.CheckArgs{}.Kind(),
			backlog: func(context.Context) (int, error) {
				return int(checks.released.Load() - (r.checks.completed.Load() - completed0)), nil
			}},
	}
	stopSampling := sampleBacklogs(ctx, kinds, t0)
	ingress.wait()
	pushes.wait()
	checks.wait()
	t1 := time.Now()
	stopSampling()
	jobCounts, err := r.endOfWindow(ctx, kinds, t0, t1)
	if err != nil {
		return false, err
	}
	drainedIn, left, err := r.drain(ctx, kinds, max(time.Minute, 3*d))
	if err != nil {
		return false, err
	}
	watch.finish()
	if err := r.stepLatencies(ctx, kinds, watch, t0, t1); err != nil {
		return false, err
	}
	printStep(scale*capacityLimit, d, kinds, jobCounts, loadBefore, drainedIn, left, ingress.errs.Load()+pushes.errs.Load()+checks.errs.Load())
	return left == "", nil
}

// settle vacuums the tables every kind works on, as autovacuum would have
// in a service running for a while.
func (r *capacityRig) settle(ctx context.Context) error {
	if err := settleTables(ctx, r.env.Pool); err != nil {
		return err
	}
	_, err := r.env.Pool.Exec(ctx, "VACUUM (ANALYZE) provider_payloads, message_events, domains")
	return err
}

// sampleBacklogs reads every kind's backlog twice a second until stopped
// and notes when each first passed one second of its load.
func sampleBacklogs(ctx context.Context, kinds []*capacityKind, t0 time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-tick.C:
				for _, k := range kinds {
					b, err := k.backlog(ctx)
					if err == nil && k.firstBehind == 0 && float64(b) > k.load() {
						k.firstBehind = now.Sub(t0)
					}
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// endOfWindow reads, as the producers stop, each kind's backlog, what it
// carried during the window, and River's jobs of its kind (available /
// running).
func (r *capacityRig) endOfWindow(ctx context.Context, kinds []*capacityKind, t0, t1 time.Time) (map[string][2]int, error) {
	d := t1.Sub(t0).Seconds()
	for _, k := range kinds {
		b, err := k.backlog(ctx)
		if err != nil {
			return nil, err
		}
		k.endBacklog = max(b, 0)
		if float64(k.endBacklog) > k.load() && k.firstBehind == 0 {
			k.firstBehind = t1.Sub(t0)
		}
	}
	rows, err := r.env.Pool.Query(ctx, `SELECT kind, count(*) FILTER (WHERE state IN ('available', 'retryable')),
		count(*) FILTER (WHERE state = 'running') FROM river_job WHERE kind = ANY($1) GROUP BY kind`,
		[]string{providers.PayloadArgs{}.Kind(), events.DeliveryKind, domains.CheckArgs{}.Kind()})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	jobs := map[string][2]int{}
	for rows.Next() {
		var kind string
		var avail, running int
		if err := rows.Scan(&kind, &avail, &running); err != nil {
			return nil, err
		}
		jobs[kind] = [2]int{avail, running}
	}
	// Carried during the window: the ingress's and emitter's calls done,
	// the payloads normalised, the pushes and checks finished.
	var normalised int
	if err := r.env.Pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE processed_at >= $1 AND processed_at < $2`, t0, t1).Scan(&normalised); err != nil {
		return nil, err
	}
	in, norm, emitted, pushed, checked := kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]
	in.achieved = float64(in.pacer.done.Load()) / d
	norm.achieved = float64(normalised) / d
	emitted.achieved = float64(emitted.pacer.done.Load()) / d
	pushed.achieved = float64(int(emitted.pacer.done.Load())-pushed.endBacklog) / d
	checked.achieved = float64(int(checked.pacer.released.Load())-checked.endBacklog) / d
	return jobs, rows.Err()
}

// drain waits for the work already offered to be done, for at most bound,
// and returns how long it took, or what was left.
func (r *capacityRig) drain(ctx context.Context, kinds []*capacityKind, bound time.Duration) (time.Duration, string, error) {
	start := time.Now()
	for {
		var left []string
		for _, k := range kinds {
			b, err := k.backlog(ctx)
			if err != nil {
				return 0, "", err
			}
			if k.pacer != nil { // calls not made, or failed, will not be done
				b -= int(k.pacer.released.Load() - k.pacer.done.Load())
			}
			if b > 0 {
				left = append(left, fmt.Sprintf("%s %d", k.name, b))
			}
		}
		if len(left) == 0 {
			return time.Since(start), "", nil
		}
		if time.Now().After(start.Add(bound)) || ctx.Err() != nil {
			return time.Since(start), strings.Join(left, ", "), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}
