package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/domains"
)

// pacer offers a fixed number of calls, rate x d, at a steady rate over d
// (an open loop: a call is offered whether or not the ones before it have
// finished) from up to conns goroutines. A call not started by the end of
// d is never made: it stays offered and not done, the generator's share of
// the backlog.
type pacer struct {
	n                    int
	released, done, errs atomic.Int64
	mu                   sync.Mutex
	lat                  []time.Duration // of each call, sorted once finished
	wg                   sync.WaitGroup
}

// pacerGrace is how late after d a released call may still start.
const pacerGrace = 50 * time.Millisecond

func startPacer(ctx context.Context, rate float64, d time.Duration, conns int, do func(context.Context) error) *pacer {
	p := &pacer{n: int(rate*d.Seconds() + 0.5)}
	tickets := make(chan struct{}, p.n)
	start := time.Now()
	deadline := start.Add(d)
	p.wg.Go(func() {
		defer close(tickets)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for released := 0; released < p.n; {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				due := min(p.n, int(now.Sub(start).Seconds()*rate))
				if !now.Before(deadline) {
					due = p.n
				}
				for ; released < due; released++ {
					tickets <- struct{}{}
				}
				p.released.Store(int64(released))
			}
		}
	})
	for range conns {
		p.wg.Go(func() {
			var local []time.Duration
			for range tickets {
				if time.Now().After(deadline.Add(pacerGrace)) || ctx.Err() != nil {
					continue // offered too late to be made: left as backlog
				}
				t0 := time.Now()
				if err := do(ctx); err != nil {
					p.errs.Add(1)
					continue
				}
				local = append(local, time.Since(t0))
				p.done.Add(1)
			}
			p.mu.Lock()
			p.lat = append(p.lat, local...)
			p.mu.Unlock()
		})
	}
	return p
}

// wait returns once every call has been made or left, with the latencies
// sorted.
func (p *pacer) wait() {
	p.wg.Wait()
	slices.Sort(p.lat)
}

// outstanding is what was offered so far and not done (failed calls
// included: they are load that was not carried).
func (p *pacer) outstanding() int { return int(p.released.Load() - p.done.Load()) }

// pushWatch waits for the push of every event a step emits and notes when
// it arrived, from the commit of the event.
type pushWatch struct {
	arrived atomic.Int64
	mu      sync.Mutex
	lat     []time.Duration
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newPushWatch() *pushWatch { return &pushWatch{stop: make(chan struct{})} }

// emitter returns a pacer call that emits one event and watches its push.
func (w *pushWatch) emitter(rc *benchReceiver, emit emitFunc) func(context.Context) error {
	return func(ctx context.Context) error {
		id, committed, err := emit(ctx)
		if err != nil {
			return err
		}
		ch := rc.expect(id)
		w.wg.Go(func() {
			select {
			case at := <-ch:
				w.arrived.Add(1)
				w.mu.Lock()
				w.lat = append(w.lat, at.Sub(committed))
				w.mu.Unlock()
			case <-w.stop:
			}
		})
		return nil
	}
}

// finish stops watching (pushes not arrived by now are not counted) and
// sorts the latencies.
func (w *pushWatch) finish() {
	close(w.stop)
	w.wg.Wait()
	slices.Sort(w.lat)
}

// checkMeter counts the domain checks the check worker finished, from its
// River subscription, with each one's time from insert to completion
// (queue wait plus run).
type checkMeter struct {
	completed, failed atomic.Int64
	mu                sync.Mutex
	lat               []time.Duration
}

// consume reads the subscription until it closes or ctx ends; River drops
// events a subscriber does not read in time, so it must always run.
func (m *checkMeter) consume(ctx context.Context, ch <-chan *river.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if ev.Job == nil || ev.Job.Kind != (domains.CheckArgs{}).Kind() {
				continue
			}
			if ev.Kind == river.EventKindJobFailed {
				m.failed.Add(1)
				continue
			}
			m.completed.Add(1)
			if ev.JobStats != nil {
				m.mu.Lock()
				m.lat = append(m.lat, ev.JobStats.QueueWaitDuration+ev.JobStats.RunDuration)
				m.mu.Unlock()
			}
		}
	}
}

// take returns the latencies noted since the last take, sorted.
func (m *checkMeter) take() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.lat
	m.lat = nil
	slices.Sort(out)
	return out
}

// waitCompleted waits until n checks have completed since the meter
// started, for at most bound.
func (m *checkMeter) waitCompleted(ctx context.Context, n int64, bound time.Duration) bool {
	until := time.Now().Add(bound)
	for m.completed.Load() < n {
		if ctx.Err() != nil || time.Now().After(until) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
