package providers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Ingress batching limits.
const (
	maxIngressBatch     = 64
	maxIngressFlushers  = 4
	ingressBatchTimeout = 10 * time.Second
)

// Ingest is one verified request to store.
type Ingest struct {
	Provider *dbsqlc.SendingProvider
	Verified Verified
	Body     []byte
	Now      time.Time
}

// JobFor returns the job that works a newly stored payload.
type JobFor func(in Ingest, payload Stored) river.JobArgs

// Ingester stores verified payloads and enqueues their jobs. Requests that
// arrive while a batch is being written wait for the next one, so under load
// one transaction (one commit, one River InsertMany) serves many requests;
// when idle a request is written at once, alone. A caller returns only
// after its batch committed, so an acknowledged payload is always stored
// with its job.
type Ingester struct {
	DB     dbutil.Executor
	River  *river.Client[pgx.Tx]
	JobFor JobFor
	// Flushers bounds the batches written at once (each holds a
	// connection); zero means 4. A DB that is one transaction needs 1.
	Flushers int

	mu       sync.Mutex
	pending  []*ingestCall
	flushers int
}

type ingestCall struct {
	in   Ingest
	out  Stored
	err  error
	done chan struct{}
}

// Store writes in (with whatever else is pending) and returns its result.
// A replayed request is Stored.Duplicate; a reused Mailgun token with
// another body is ErrReplayMismatch.
func (g *Ingester) Store(ctx context.Context, in Ingest) (Stored, error) {
	c := &ingestCall{in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	limit := g.Flushers
	if limit <= 0 {
		limit = maxIngressFlushers
	}
	if g.flushers < limit {
		g.flushers++
		go g.flush()
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		// The batch may still commit; the provider will retry and the
		// retry is acknowledged as a duplicate.
		return Stored{}, ctx.Err()
	}
}

func (g *Ingester) flush() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), maxIngressBatch)
		if n == 0 {
			g.flushers--
			g.mu.Unlock()
			return
		}
		batch := make([]*ingestCall, n)
		copy(batch, g.pending)
		rest := copy(g.pending, g.pending[n:])
		clear(g.pending[rest:])
		g.pending = g.pending[:rest]
		g.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), ingressBatchTimeout)
		err := g.write(ctx, batch)
		cancel()
		for _, c := range batch {
			if err != nil {
				c.out, c.err = Stored{}, err
			}
			close(c.done)
		}
	}
}

// write stores a batch in one transaction. Per-request outcomes (duplicate,
// replay mismatch) are set on the calls; an error fails the whole batch.
func (g *Ingester) write(ctx context.Context, batch []*ingestCall) error {
	return dbutil.WithTx(ctx, g.DB, func(ctx context.Context, tx pgx.Tx) error {
		jobs := make([]river.InsertManyParams, 0, len(batch))
		touched := map[[16]byte]bool{}
		for _, c := range batch {
			c.out, c.err = Stored{}, nil
			st, err := storePayload(ctx, tx, c.in.Provider, c.in.Verified, c.in.Body, !touched[c.in.Provider.ID], c.in.Now)
			if err == ErrReplayMismatch {
				c.err = err
				continue
			}
			if err != nil {
				return err
			}
			touched[c.in.Provider.ID] = true
			c.out = st
			if !st.Duplicate && g.JobFor != nil {
				if args := g.JobFor(c.in, st); args != nil {
					jobs = append(jobs, river.InsertManyParams{Args: args})
				}
			}
		}
		if len(jobs) > 0 {
			if _, err := g.River.InsertManyTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("error enqueueing provider payload jobs: %w", err)
			}
		}
		return nil
	})
}
