package providers

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Ingress batching limits.
const (
	maxIngressBatch    = 64
	maxIngressFlushers = 2
	// minConcurrentBatch is how many requests must be waiting before a
	// batch is started while another one is being written. A transaction
	// has a fixed cost (BEGIN, River's insert, COMMIT) several times a
	// payload's own; a second writer that starts on the two or three
	// requests that arrived a moment ago pays it for almost nothing, and
	// on a busy machine takes the CPU the requests themselves need. Those
	// few wait for the writer that is running, which takes everything
	// pending when it commits. A request that arrives when nothing is
	// being written is always written at once.
	minConcurrentBatch  = 16
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
	// BatchJob, when set, returns one job for the newly stored payloads of
	// one account in a batch, those for which JobFor returned nil: River's
	// per-job cost is the largest share of the ingress transaction, so an
	// account's payloads of a batch are normalised by one job. A batch of
	// several accounts queues one job per account, so that each job is
	// counted against its own account's bound (Gate) and one tenant's
	// flood never carries another's payloads behind it.
	BatchJob func(account uuid.UUID, payloads []uuid.UUID) river.JobArgs
	// Flushers bounds the batches written at once (each holds a
	// connection); zero means maxIngressFlushers. A DB that is one
	// transaction needs 1.
	Flushers int

	mu       sync.Mutex
	pending  []*ingestCall
	flushers int
	batches  int // transactions started, for tests
}

// Batches returns how many transactions the Ingester has started.
func (g *Ingester) Batches() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches
}

type ingestCall struct {
	in   Ingest
	out  Stored
	err  error
	done chan struct{}
}

// Store writes in (with whatever else is pending) and returns its result.
// A replayed request is Stored.Duplicate; a replay key (a Mailgun token, a
// Svix id) reused with another body is a *ReplayMismatchError. A request
// whose payload cannot be stored fails alone, never the rest of its batch.
func (g *Ingester) Store(ctx context.Context, in Ingest) (Stored, error) {
	c := &ingestCall{in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.flushers == 0 || (g.flushers < g.flusherLimit() && len(g.pending) >= minConcurrentBatch) {
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

func (g *Ingester) flusherLimit() int {
	if g.Flushers <= 0 {
		return maxIngressFlushers
	}
	return g.Flushers
}

// flush writes batches until nothing is pending. While another flusher
// runs it leaves a short queue to that one (minConcurrentBatch): the
// checks are made under g.mu, so the last flusher to look always takes
// what is pending, and a pending request always has a flusher.
func (g *Ingester) flush() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), maxIngressBatch)
		if n == 0 || (g.flushers > 1 && n < minConcurrentBatch) {
			g.flushers--
			g.mu.Unlock()
			return
		}
		batch := make([]*ingestCall, n)
		copy(batch, g.pending)
		rest := copy(g.pending, g.pending[n:])
		clear(g.pending[rest:])
		g.pending = g.pending[:rest]
		g.batches++
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

// write stores a batch in one transaction: one multi-row insert, a
// lookup only for the requests that were replays, one touch per provider,
// one InsertMany (of one job per account). The batch holds several
// accounts' requests, so a request whose insert fails fails alone
// (insert); per-request outcomes (stored, duplicate, replay mismatch,
// failure) are set on the calls. An error returned (the transaction, the
// job insert) fails the whole batch.
func (g *Ingester) write(ctx context.Context, batch []*ingestCall) error {
	q := dbsqlc.New()
	n := len(batch)
	p := dbsqlc.ProviderPayloadInsertManyParams{
		Ids: make([]uuid.UUID, n), ProviderIds: make([]uuid.UUID, n), AccountIds: make([]uuid.UUID, n),
		ReplayKeys: make([]string, n), BodySha256s: make([][]byte, n), Bodies: make([][]byte, n), HeaderEventIds: make([]string, n),
	}
	for i, c := range batch {
		sum := sha256.Sum256(c.in.Body)
		p.Ids[i] = uuid.Must(uuid.NewV7())
		p.ProviderIds[i], p.AccountIds[i] = c.in.Provider.ID, c.in.Provider.AccountID
		p.ReplayKeys[i], p.BodySha256s[i], p.Bodies[i] = storableKey(c.in.Verified.ReplayKey), sum[:], c.in.Body
		if c.in.Verified.HeaderEventID != "" {
			p.HeaderEventIds[i] = storableKey(c.in.Verified.HeaderEventID)
		}
	}
	return dbutil.WithTx(ctx, g.DB, func(ctx context.Context, tx pgx.Tx) error {
		for _, c := range batch {
			c.out, c.err = Stored{}, nil
		}
		isNew, err := insertPayloads(ctx, tx, p, batch)
		if err != nil {
			return err
		}
		jobs := make([]river.InsertManyParams, 0, len(isNew))
		touched := map[uuid.UUID]bool{}
		var (
			accounts []uuid.UUID // in order of first request
			batched  = map[uuid.UUID][]uuid.UUID{}
		)
		for i, c := range batch {
			if c.err != nil {
				continue // its insert failed
			}
			if !isNew[p.Ids[i]] {
				prev, err := q.ProviderPayloadGetByReplayKey(ctx, tx, dbsqlc.ProviderPayloadGetByReplayKeyParams{
					AccountID: p.AccountIds[i], ProviderID: p.ProviderIds[i], ReplayKey: p.ReplayKeys[i]})
				if dbutil.IsNotFound(err) {
					c.err = ErrNotFound // deleted since the request was verified
					continue
				}
				if err != nil {
					return fmt.Errorf("error reading replayed payload: %w", err)
				}
				if string(prev.BodySha256) != string(p.BodySha256s[i]) {
					c.err = &ReplayMismatchError{Kind: c.in.Provider.Kind}
					continue
				}
				c.out = Stored{PayloadID: prev.ID, Duplicate: true}
				continue
			}
			c.out = Stored{PayloadID: p.Ids[i]}
			if !touched[p.ProviderIds[i]] {
				touched[p.ProviderIds[i]] = true
				if err := touchProvider(ctx, tx, c.in); err != nil {
					return err
				}
			}
			var args river.JobArgs
			if g.JobFor != nil {
				args = g.JobFor(c.in, c.out)
			}
			switch {
			case args != nil:
				jobs = append(jobs, river.InsertManyParams{Args: args})
			case g.BatchJob != nil:
				account := p.AccountIds[i]
				if _, ok := batched[account]; !ok {
					accounts = append(accounts, account)
				}
				batched[account] = append(batched[account], c.out.PayloadID)
			}
		}
		for _, account := range accounts {
			jobs = append(jobs, river.InsertManyParams{Args: g.BatchJob(account, batched[account])})
		}
		if len(jobs) > 0 {
			if _, err := g.River.InsertManyTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("error enqueueing provider payload jobs: %w", err)
			}
		}
		return nil
	})
}

// insertPayloads inserts the batch p (one element per call) in tx and
// returns the ids stored. The batch is one statement in a savepoint; if it
// fails, each payload is inserted in a savepoint of its own, so a payload
// that cannot be stored fails its own call (c.err) and no other. The error
// returned is a failure of the transaction itself.
func insertPayloads(ctx context.Context, tx pgx.Tx, p dbsqlc.ProviderPayloadInsertManyParams, batch []*ingestCall) (map[uuid.UUID]bool, error) {
	q := dbsqlc.New()
	isNew := make(map[uuid.UUID]bool, len(batch))
	insert := func(sp pgx.Tx, p dbsqlc.ProviderPayloadInsertManyParams) error {
		stored, err := q.ProviderPayloadInsertMany(ctx, sp, p)
		if err != nil {
			return fmt.Errorf("error storing provider payloads: %w", err)
		}
		for _, id := range stored {
			isNew[id] = true
		}
		return nil
	}
	failed, err := inSavepoint(ctx, tx, func(sp pgx.Tx) error { return insert(sp, p) })
	if err != nil || failed == nil || len(batch) == 1 {
		if failed != nil {
			batch[0].err = failed
		}
		return isNew, err
	}
	clear(isNew)
	for i, c := range batch {
		one := dbsqlc.ProviderPayloadInsertManyParams{
			Ids: p.Ids[i : i+1], ProviderIds: p.ProviderIds[i : i+1], AccountIds: p.AccountIds[i : i+1], ReplayKeys: p.ReplayKeys[i : i+1],
			BodySha256s: p.BodySha256s[i : i+1], Bodies: p.Bodies[i : i+1], HeaderEventIds: p.HeaderEventIds[i : i+1],
		}
		failed, err := inSavepoint(ctx, tx, func(sp pgx.Tx) error { return insert(sp, one) })
		if err != nil {
			return nil, err
		}
		c.err = failed
	}
	return isNew, nil
}

// touchProvider records that in's provider got a payload, unless the
// (cached) row says it was touched within the minute: the UPDATE would
// change nothing. last_payload_at is a hint for the user, so a touch that
// fails is rolled back alone and costs no request its payload.
func touchProvider(ctx context.Context, tx pgx.Tx, in Ingest) error {
	now := in.Now
	if last := in.Provider.LastPayloadAt; last != nil && last.After(now.Add(-time.Minute)) {
		return nil
	}
	_, err := inSavepoint(ctx, tx, func(sp pgx.Tx) error {
		return dbsqlc.New().ProviderTouch(ctx, sp, dbsqlc.ProviderTouchParams{ID: in.Provider.ID, Now: now, StaleBefore: now.Add(-time.Minute)})
	})
	return err
}
