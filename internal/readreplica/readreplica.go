// Package readreplica sends read-only statements to a streaming replica
// while the replica is known to be fresh, and to the primary otherwise.
//
// Freshness is measured, not assumed: every probe interval the router reads
// the primary's current WAL position and then the replica's replayed
// position. When the replica has replayed what the primary had written at
// the probe's start, the replica is at most one interval behind. A replica
// that has not caught up with any sample of the last MaxLag (or does not
// answer) is stale, and reads go to the primary until it catches up again.
// A read served by the replica therefore misses at most the writes of the
// last MaxLag plus one probe interval.
package readreplica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// DefaultInterval is how often the router probes the replica.
const DefaultInterval = time.Second

// Router picks the executor of each read-only statement.
type Router struct {
	primary, replica dbutil.Executor
	maxLag, interval time.Duration
	logger           *slog.Logger
	now              func() time.Time

	fresh atomic.Bool
	lag   atomic.Int64 // nanoseconds; -1 when unknown

	mu      sync.Mutex
	samples []sample // primary WAL positions, oldest first, within maxLag
}

type sample struct {
	at  time.Time
	lsn pgLSN
}

// Options configures a Router.
type Options struct {
	// MaxLag is the staleness past which reads go to the primary.
	MaxLag time.Duration
	// Interval is the probe period (DefaultInterval when zero).
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns a router over primary and replica. With a nil replica every
// read goes to the primary and Run returns at once. Reads go to the primary
// until the first probe finds the replica fresh.
func New(primary, replica dbutil.Executor, o Options) *Router {
	r := &Router{primary: primary, replica: replica, maxLag: o.MaxLag, interval: o.Interval, logger: o.Logger, now: o.Now}
	if r.interval <= 0 {
		r.interval = DefaultInterval
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.lag.Store(-1)
	return r
}

// Executor is where a read-only statement runs now: the replica while it is
// fresh, the primary otherwise. A statement that writes must never use it.
func (r *Router) Executor() dbutil.Executor {
	if r.replica != nil && r.fresh.Load() {
		return r.replica
	}
	return r.primary
}

// Reads is an executor that picks Executor() anew for every call, for code
// that holds one executor for its lifetime (the data API's runner).
func (r *Router) Reads() dbutil.Executor { return routed{r} }

// Fresh reports whether reads go to the replica now.
func (r *Router) Fresh() bool { return r.replica != nil && r.fresh.Load() }

// Lag is the replica's measured staleness bound, and false when unknown
// (no replica, not probed yet, or behind every sample kept).
func (r *Router) Lag() (time.Duration, bool) {
	n := r.lag.Load()
	return time.Duration(n), n >= 0
}

// Run probes until ctx ends.
func (r *Router) Run(ctx context.Context) {
	if r.replica == nil {
		return
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Probe measures the replica once and updates where reads go.
func (r *Router) Probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.interval+time.Second)
	defer cancel()
	start := r.now()
	var primary pgLSN
	err := r.primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&primary)
	if err != nil {
		r.setFresh(false, -1, "the primary's WAL position could not be read", err)
		return
	}
	var replayed *pgLSN
	err = r.replica.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&replayed)
	if err != nil || replayed == nil {
		r.setFresh(false, -1, "the replica's replay position could not be read (is DATABASE_READ_URL a standby?)", err)
		return
	}
	lag, known := r.observe(start, primary, *replayed)
	switch {
	case !known:
		r.setFresh(false, -1, "the replica is behind every position of the last DATABASE_READ_MAX_LAG", nil)
	case lag > r.maxLag:
		r.setFresh(false, lag, "the replica lags more than DATABASE_READ_MAX_LAG", nil)
	default:
		r.setFresh(true, lag, "", nil)
	}
}

// observe records the primary's position sampled at start and returns the
// staleness bound of a replica that has replayed up to replayed: the age of
// the newest sample it has reached.
func (r *Router) observe(start time.Time, primary, replayed pgLSN) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sample{at: start, lsn: primary})
	keep := r.maxLag + 2*r.interval
	for len(r.samples) > 1 && r.now().Sub(r.samples[0].at) > keep {
		r.samples = r.samples[1:]
	}
	for i := len(r.samples) - 1; i >= 0; i-- {
		if r.samples[i].lsn <= replayed {
			return max(0, r.now().Sub(r.samples[i].at)), true
		}
	}
	return 0, false
}

func (r *Router) setFresh(fresh bool, lag time.Duration, why string, err error) {
	r.lag.Store(int64(lag))
	if was := r.fresh.Swap(fresh); was == fresh {
		return
	}
	if fresh {
		r.logger.Info("read replica is fresh: read-only routes use it", slog.Duration("lag", lag))
		return
	}
	attrs := []any{slog.String("reason", why)}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	r.logger.Warn("read replica is stale or unreachable: read-only routes use the primary", attrs...)
}

// routed is an executor that asks the router for every call.
type routed struct{ r *Router }

var _ dbutil.Executor = routed{}

func (e routed) Begin(ctx context.Context) (pgx.Tx, error) { return e.r.Executor().Begin(ctx) }
func (e routed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.r.Executor().Exec(ctx, sql, args...)
}
func (e routed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return e.r.Executor().Query(ctx, sql, args...)
}
func (e routed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return e.r.Executor().QueryRow(ctx, sql, args...)
}
func (e routed) CopyFrom(ctx context.Context, t pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return e.r.Executor().CopyFrom(ctx, t, cols, src)
}
func (e routed) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return e.r.Executor().SendBatch(ctx, b)
}
