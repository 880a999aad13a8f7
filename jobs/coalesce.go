package jobs

import (
	"context"
	"sync"
	"time"
)

// coalescer runs concurrent requests of one kind together. Requests that
// arrive while a batch is in flight wait for the next batch, so under load
// one statement (one round trip, one commit) serves many callers, and when
// idle a request runs at once, alone: no timer holds it back.
//
// A caller gets its own result only after its batch has run, so batching
// changes how many statements run, not what is committed before the caller
// goes on: a crash leaves the same rows behind as one statement per call.
type coalescer[In, Out any] struct {
	// maxBatch bounds the requests in one batch; maxFlushers the batches
	// in flight at once (each holds one database connection).
	maxBatch, maxFlushers int
	// timeout bounds one batch; it runs on its own context, since its
	// callers' contexts may end while it runs.
	timeout time.Duration
	// run fills outs[i] and errs[i] for ins[i].
	run func(ctx context.Context, ins []In, outs []Out, errs []error)

	mu       sync.Mutex
	pending  []*coalesced[In, Out]
	flushers int
}

type coalesced[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

// do runs in (with whatever else is pending) and returns its result.
func (c *coalescer[In, Out]) do(in In) (Out, error) {
	r := &coalesced[In, Out]{in: in, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, r)
	if c.flushers < c.maxFlushers {
		c.flushers++
		go c.flush()
	}
	c.mu.Unlock()
	<-r.done
	return r.out, r.err
}

// flush runs batches until nothing is pending.
func (c *coalescer[In, Out]) flush() {
	for {
		c.mu.Lock()
		n := min(len(c.pending), c.maxBatch)
		if n == 0 {
			c.flushers--
			c.mu.Unlock()
			return
		}
		batch := make([]*coalesced[In, Out], n)
		copy(batch, c.pending)
		rest := copy(c.pending, c.pending[n:])
		clear(c.pending[rest:])
		c.pending = c.pending[:rest]
		c.mu.Unlock()

		ins := make([]In, n)
		for i, r := range batch {
			ins[i] = r.in
		}
		outs, errs := make([]Out, n), make([]error, n)
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.run(ctx, ins, outs, errs)
		cancel()
		for i, r := range batch {
			r.out, r.err = outs[i], errs[i]
			close(r.done)
		}
	}
}
