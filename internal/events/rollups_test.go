package events_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/alerts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

// counter is one key of event_counts_hourly, its events the sum of the
// key's slots, or of the same grouping recounted from raw rows.
type counter struct {
	Account  uuid.UUID
	Hour     time.Time
	Type     string
	Severity string
	Events   int64
}

func collectCounters(t *testing.T, db dbutil.Executor, sql string) []counter {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (counter, error) {
		var c counter
		err := r.Scan(&c.Account, &c.Hour, &c.Type, &c.Severity, &c.Events)
		c.Hour = c.Hour.UTC()
		return c, err
	})
	require.NoError(t, err)
	return out
}

// rollupCounters sums event_counts_hourly's slots per key, leaving out the
// keys whose slots cancel out.
func rollupCounters(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, hour, event_type, severity, sum(events)::bigint
		FROM event_counts_hourly GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0 ORDER BY 1, 2, 3, 4`)
}

func recountCounters(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*)
		FROM events GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`)
}

// dailyCounters sums event_counts_daily's slots per key, a day as its
// midnight in Hour.
func dailyCounters(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, day::timestamp AT TIME ZONE 'UTC', event_type, severity,
			sum(events)::bigint
		FROM event_counts_daily GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0 ORDER BY 1, 2, 3, 4`)
}

func recountDaily(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, date_trunc('day', created_at, 'UTC'), event_type, severity, count(*)
		FROM events GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`)
}

// requireRollupsEqualRecount: every hourly and every daily key's sum over
// its slots equals a GROUP BY of the raw rows, no key without rows has a
// nonzero sum, and no slot's row is at zero.
func requireRollupsEqualRecount(t *testing.T, db dbutil.Executor, msg string) {
	t.Helper()
	want := recountCounters(t, db)
	require.NotEmpty(t, want, msg)
	require.Equal(t, want, rollupCounters(t, db), msg)
	require.Equal(t, recountDaily(t, db), dailyCounters(t, db), "daily counters "+msg)
	var zero int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM event_counts_hourly WHERE events = 0)
		+ (SELECT count(*) FROM event_counts_daily WHERE events = 0)`).Scan(&zero))
	require.Zero(t, zero, "rows at zero "+msg)
	require.Equal(t, recountOpenAlerts(t, db), openAlerts(t, db), "open alert counters "+msg)
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM alert_open_counts WHERE alerts = 0`).Scan(&zero))
	require.Zero(t, zero, "open alert rows at zero "+msg)
}

// openAlerts sums alert_open_counts' slots per (account, hour), in the
// shape of counter (Type and Severity empty).
func openAlerts(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, hour, '', '', sum(alerts)::bigint
		FROM alert_open_counts GROUP BY 1, 2 HAVING sum(alerts) <> 0 ORDER BY 1, 2`)
}

func recountOpenAlerts(t *testing.T, db dbutil.Executor) []counter {
	return collectCounters(t, db, `SELECT account_id, date_trunc('hour', created_at, 'UTC'), '', '', count(*)
		FROM events WHERE severity = 'critical' AND acknowledged_at IS NULL GROUP BY 1, 2 ORDER BY 1, 2`)
}

// rollupEmit is one event a rollupEmitArgs job emits.
type rollupEmit struct {
	Account  uuid.UUID       `json:"account"`
	Type     string          `json:"type"`
	Severity events.Severity `json:"severity"`
	At       time.Time       `json:"at"`
}

// rollupEmitArgs emits its events in one transaction, through the
// production emitter, and fails its first Fail attempts after emitting
// (the transaction rolls back and River retries the job).
type rollupEmitArgs struct {
	Events []rollupEmit `json:"events"`
	Fail   int          `json:"fail"`
}

const rollupQueue = "rollup_test"

func (rollupEmitArgs) Kind() string { return "test_rollup_emit" }
func (rollupEmitArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: rollupQueue, MaxAttempts: 20}
}

var errInjected = errors.New("injected failure after emitting")

type rollupEmitWorker struct {
	river.WorkerDefaults[rollupEmitArgs]
	pool *pgxpool.Pool
}

// NextRetry: at once (River makes a retry due within its scheduler
// interval available immediately).
func (w *rollupEmitWorker) NextRetry(*river.Job[rollupEmitArgs]) time.Time {
	return time.Now().Add(time.Millisecond)
}

func (w *rollupEmitWorker) Work(ctx context.Context, job *river.Job[rollupEmitArgs]) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	em := &events.Emitter{} // the River client comes from the job's context, as in every producer
	for _, e := range job.Args.Events {
		ex, _ := events.Lookup(e.Type)
		if _, err := em.Emit(ctx, tx, events.Event{AccountID: e.Account, Type: e.Type, Payload: ex.Example, Severity: e.Severity, At: e.At}); err != nil {
			return err
		}
	}
	if job.Attempt <= job.Args.Fail {
		return errInjected
	}
	return tx.Commit(ctx)
}

// rollupRunner works rollupEmitArgs jobs with a real River client.
type rollupRunner struct {
	client   *river.Client[pgx.Tx]
	done     <-chan *river.Event
	injected int // attempts failed on purpose
	deadlock int // attempts failed by a deadlock between two emitting jobs
}

func newRollupRunner(t *testing.T, pool *pgxpool.Pool) *rollupRunner {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := jobs.Workers(jobs.Deps{Pool: pool, Logger: logger})
	river.AddWorker(workers, &rollupEmitWorker{pool: pool})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: logger, Workers: workers, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond,
		Queues: map[string]river.QueueConfig{rollupQueue: {MaxWorkers: 4}},
	})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		cancel()
		require.NoError(t, client.Stop(context.Background()))
	})
	return &rollupRunner{client: client, done: done}
}

// run inserts the jobs and waits until every one has completed; a failed
// attempt must be an injected one (or a deadlock, which River retries like
// any error).
func (r *rollupRunner) run(t *testing.T, list []rollupEmitArgs) {
	t.Helper()
	params := make([]river.InsertManyParams, len(list))
	for i, a := range list {
		params[i] = river.InsertManyParams{Args: a}
	}
	_, err := r.client.InsertMany(context.Background(), params)
	require.NoError(t, err)
	for completed := 0; completed < len(list); {
		ev := <-r.done
		if ev.Job.Kind != (rollupEmitArgs{}).Kind() {
			continue
		}
		if ev.Kind == river.EventKindJobCompleted {
			completed++
			continue
		}
		msg := ev.Job.Errors[len(ev.Job.Errors)-1].Error
		switch {
		case msg == errInjected.Error():
			r.injected++
		case strings.Contains(msg, "deadlock detected"):
			r.deadlock++
		default:
			t.Fatalf("emit job %d failed: %s", ev.Job.ID, msg)
		}
		require.Less(t, ev.Job.Attempt, ev.Job.MaxAttempts, "the job is retried")
	}
}

// rollupStream draws the randomized events: every registered type, every
// requested severity, times over six days with many on hour boundaries and
// a third of them in the hot hours, where the readers' windows end.
type rollupStream struct {
	rng      *rand.Rand
	accounts []uuid.UUID
	types    []events.Type
	base     time.Time
	hot      []time.Time
}

func (s *rollupStream) at() time.Time {
	hour := s.base.Add(time.Duration(s.rng.IntN(6*24)) * time.Hour)
	switch n := s.rng.IntN(12); {
	case n == 0:
		return hour // exactly on an hour boundary
	case n == 1:
		return hour.Add(-time.Microsecond)
	case n < 6:
		hour = s.hot[s.rng.IntN(len(s.hot))]
	}
	return hour.Add(time.Duration(s.rng.Int64N(int64(time.Hour))))
}

func (s *rollupStream) jobs(n int) []rollupEmitArgs {
	severities := []events.Severity{"", events.SeverityInfo, events.SeverityWarning, events.SeverityCritical}
	out := make([]rollupEmitArgs, n)
	for i := range out {
		for range 1 + s.rng.IntN(6) {
			out[i].Events = append(out[i].Events, rollupEmit{
				Account:  s.accounts[s.rng.IntN(len(s.accounts))],
				Type:     s.types[s.rng.IntN(len(s.types))].Name,
				Severity: severities[s.rng.IntN(len(severities))],
				At:       s.at(),
			})
		}
		if f := s.rng.IntN(10); f < 3 {
			out[i].Fail = 1
		} else if f == 3 {
			out[i].Fail = 2
		}
	}
	return out
}

// flipAlerts acknowledges or withdraws the acknowledgement of some alerts
// through internal/alerts (each writes an audit event too).
func (s *rollupStream) flipAlerts(t *testing.T, pool *pgxpool.Pool, em *events.Emitter) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT id, account_id, acknowledged_at IS NOT NULL FROM events
		WHERE severity = 'critical' ORDER BY id`)
	require.NoError(t, err)
	type alert struct {
		id, account uuid.UUID
		acked       bool
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (alert, error) {
		var a alert
		return a, r.Scan(&a.id, &a.account, &a.acked)
	})
	require.NoError(t, err)
	for _, a := range list {
		if s.rng.IntN(3) != 0 {
			continue
		}
		if a.acked {
			_, err = alerts.Unacknowledge(ctx, pool, em, a.account, a.id, "mw_test", s.at())
		} else {
			_, err = alerts.Acknowledge(ctx, pool, em, a.account, a.id, alerts.Acknowledgement{By: "ops", KeyIdentifier: "mw_test"}, s.at())
		}
		require.NoError(t, err)
	}
}

// TestEventRollupsEqualRecount drives a randomized stream through the
// production emit path (River jobs, some failing after they emitted and
// retried), acknowledgements, retention runs and account deletions, and
// holds the hourly counters to a recount of the raw rows after each step;
// then holds every reader to direct counts of raw rows.
func TestEventRollupsEqualRecount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	base := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	s := &rollupStream{rng: rand.New(rand.NewPCG(seed, 26)), types: events.Types(), base: base,
		hot: []time.Time{base.Add(2*24*time.Hour + 7*time.Hour), base.Add(5*24*time.Hour + 13*time.Hour),
			base.Add(3*24*time.Hour + 21*time.Hour), base.Add(4*24*time.Hour + 13*time.Hour)}}
	for range 4 {
		s.accounts = append(s.accounts, testfactory.Account(t, pool))
	}
	r := newRollupRunner(t, pool)
	em := &events.Emitter{River: r.client}

	t.Run("RolledBackEmitLeavesCounters", func(t *testing.T) {
		r.run(t, s.jobs(3))
		before := rollupCounters(t, pool)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		for _, e := range s.jobs(1)[0].Events {
			ex, _ := events.Lookup(e.Type)
			_, err := em.Emit(ctx, tx, events.Event{AccountID: e.Account, Type: e.Type, Payload: ex.Example, At: e.At})
			require.NoError(t, err)
		}
		require.NotEqual(t, before, rollupCounters(t, tx), "the emitting transaction counts its events")
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, before, rollupCounters(t, pool), "a rolled-back emit leaves the counters as they were")
	})

	for round := range 8 {
		r.run(t, s.jobs(25))
		requireRollupsEqualRecount(t, pool, "after emits")
		s.flipAlerts(t, pool, em)
		requireRollupsEqualRecount(t, pool, "after acknowledgements")
		switch round {
		case 2:
			_, err := events.Prune(ctx, pool, base.Add(24*time.Hour+17*time.Minute), 7)
			require.NoError(t, err)
		case 5:
			_, err := events.PruneForPlan(ctx, pool, plans.Free, plans.Free, base.Add(36*time.Hour), 11)
			require.NoError(t, err)
		}
		requireRollupsEqualRecount(t, pool, "after retention")
	}
	require.Positive(t, r.injected, "some emits were rolled back and retried")
	t.Logf("failed attempts: %d injected, %d deadlocks", r.injected, r.deadlock)

	// Two accounts go: one by the purge of a deleted account, one by a
	// plain DELETE (the cascade).
	_, err := pool.Exec(ctx, "UPDATE accounts SET deleted_at = now() WHERE id = $1", s.accounts[2])
	require.NoError(t, err)
	res, err := accounts.Purge(ctx, pool, s.accounts[2], accounts.PurgeOptions{Batch: 13})
	require.NoError(t, err)
	require.True(t, res.Done)
	n, err := dbsqlc.New().AccountDelete(ctx, pool, s.accounts[3])
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	requireRollupsEqualRecount(t, pool, "after the accounts went")
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM event_counts_hourly WHERE account_id = ANY($1))
		+ (SELECT count(*) FROM event_counts_daily WHERE account_id = ANY($1))`, s.accounts[2:]).Scan(&left))
	require.Zero(t, left)

	for _, account := range s.accounts[:2] {
		s.anchor(t, pool, em, account)
		checkReaders(t, pool, s, account)
	}
}

// anchor emits three events in each hot hour of account (at 5, 30 and 55
// minutes), so that every window end checkReaders puts in a hot hour has
// events on both of its sides whatever the random stream drew there.
func (s *rollupStream) anchor(t *testing.T, pool *pgxpool.Pool, em *events.Emitter, account uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	ex, _ := events.Lookup(s.types[0].Name)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, hour := range s.hot {
			for _, m := range []time.Duration{5, 30, 55} {
				if _, err := em.Emit(ctx, tx, events.Event{AccountID: account, Type: s.types[0].Name, Payload: ex.Example,
					At: hour.Add(m * time.Minute)}); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	requireRollupsEqualRecount(t, pool, "after the anchors")
}

// checkReaders holds each reader to a direct count of the account's raw
// rows, over windows whose ends fall inside hours with events on both
// sides of the end (so a partial hour read wrongly shows).
func checkReaders(t *testing.T, pool *pgxpool.Pool, s *rollupStream, account uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	now := s.hot[1].Add(27*time.Minute + 41*time.Second + 123456*time.Microsecond)
	var inHot []time.Time
	rows, err := pool.Query(ctx, `SELECT created_at FROM events WHERE account_id = $1 AND created_at >= $2
		AND created_at < $2 + interval '1 hour' ORDER BY created_at`, account, s.hot[0])
	require.NoError(t, err)
	inHot, err = pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(inHot), 3)
	onEvent := inHot[len(inHot)/2] // exclusive: this event is not counted
	from := s.hot[2].Add(20*time.Minute + 500*time.Microsecond)
	for _, end := range []time.Time{onEvent, now, now.Add(-24 * time.Hour), from} {
		requireRowsAround(t, pool, account, end)
	}

	t.Run("CountByDay", func(t *testing.T) {
		got, err := events.CountByDay(ctx, pool, account, from, now)
		require.NoError(t, err)
		require.Equal(t, rawByDay(t, pool, account, from, now), got)
	})
	t.Run("CountByDayEdges", func(t *testing.T) {
		// Windows whose ends fall on a midnight, on an hour, on an event,
		// just after a midnight or inside an hour, over less than an hour
		// up to the whole stream; and random ones. Each part of
		// rollups.SplitDays is empty in some and not in others.
		midnight := s.base.Add(3 * 24 * time.Hour)
		ends := []time.Time{s.base, midnight, midnight.Add(-time.Hour), midnight.Add(time.Hour),
			midnight.Add(time.Microsecond), midnight.Add(-time.Microsecond), onEvent, from, now,
			s.hot[0], s.hot[0].Add(37 * time.Minute), s.base.Add(6 * 24 * time.Hour)}
		for range 20 {
			ends = append(ends, s.base.Add(time.Duration(s.rng.Int64N(int64(7*24*time.Hour)))-12*time.Hour))
		}
		for i, a := range ends {
			for _, b := range ends[i+1:] {
				lo, hi := a, b
				if hi.Before(lo) {
					lo, hi = hi, lo
				}
				got, err := events.CountByDay(ctx, pool, account, lo, hi)
				require.NoError(t, err)
				require.Equal(t, rawByDay(t, pool, account, lo, hi), got, "[%s, %s)", lo, hi)
			}
			got, err := events.CountByDay(ctx, pool, account, a, time.Time{})
			require.NoError(t, err)
			require.Equal(t, rawByDay(t, pool, account, a, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)), got, "[%s, )", a)
		}
	})
	t.Run("DailyVolume", func(t *testing.T) {
		first := time.Date(now.Year(), now.Month(), now.Day()-6, 0, 0, 0, 0, time.UTC)
		got, err := events.DailyVolume(ctx, pool, account, first, 7)
		require.NoError(t, err)
		want := make([]events.DayVolume, 7)
		for i := range want {
			want[i].Day = first.AddDate(0, 0, i)
			want[i].Info, want[i].Warning, want[i].Critical = rawSeverities(t, pool, account,
				`created_at >= $2 AND created_at < $2 + interval '1 day'`, want[i].Day)
		}
		require.Equal(t, want, got)
	})
	t.Run("TypeBreakdown", func(t *testing.T) {
		for _, since := range []time.Time{onEvent, s.hot[3], from} {
			got, err := events.TypeBreakdown(ctx, pool, account, since)
			require.NoError(t, err)
			rows, err := pool.Query(ctx, `SELECT event_type,
				count(*) FILTER (WHERE severity = 'info'), count(*) FILTER (WHERE severity = 'warning'),
				count(*) FILTER (WHERE severity = 'critical')
				FROM events WHERE account_id = $1 AND created_at > $2 GROUP BY event_type ORDER BY count(*) DESC, event_type`, account, since)
			require.NoError(t, err)
			want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.TypeCount, error) {
				var c events.TypeCount
				return c, r.Scan(&c.Type, &c.Info, &c.Warning, &c.Critical)
			})
			require.NoError(t, err)
			require.Equal(t, want, got, "since %s", since)
		}
	})
	t.Run("CountBySeverity", func(t *testing.T) {
		since := now.Add(-24 * time.Hour)
		got, err := events.CountBySeverity(ctx, pool, account, since)
		require.NoError(t, err)
		var want events.SeverityCounts
		want.Info, want.Warning, want.Critical = rawSeverities(t, pool, account, `created_at >= $2`, since)
		require.Equal(t, want, got)
	})
}

// rawByDay counts the account's raw rows of [from, until) per UTC day,
// type and severity, as CountByDay answers.
func rawByDay(t *testing.T, pool dbutil.Executor, account uuid.UUID, from, until time.Time) []events.DayCount {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT (created_at AT TIME ZONE 'UTC')::date, event_type, severity, count(*)
		FROM events WHERE account_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
		account, from, until)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.DayCount, error) {
		var c events.DayCount
		return c, r.Scan(&c.Day, &c.Type, &c.Severity, &c.Events)
	})
	require.NoError(t, err)
	return want
}

// rawSeverities counts the account's raw rows matching cond (on $2) per severity.
func rawSeverities(t *testing.T, pool *pgxpool.Pool, account uuid.UUID, cond string, arg time.Time) (info, warning, critical int64) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE severity = 'info'),
		count(*) FILTER (WHERE severity = 'warning'), count(*) FILTER (WHERE severity = 'critical')
		FROM events WHERE account_id = $1 AND `+cond, account, arg).Scan(&info, &warning, &critical))
	return info, warning, critical
}

// requireRowsAround: the account has raw rows in at's hour both before at
// (or at it) and after it.
func requireRowsAround(t *testing.T, pool *pgxpool.Pool, account uuid.UUID, at time.Time) {
	t.Helper()
	var before, after int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE created_at <= $2), count(*) FILTER (WHERE created_at > $2)
		FROM events WHERE account_id = $1 AND created_at >= date_trunc('hour', $2::timestamptz, 'UTC')
		AND created_at < date_trunc('hour', $2::timestamptz, 'UTC') + interval '1 hour'`, account, at).Scan(&before, &after))
	require.True(t, before > 0 && after > 0, "rows on both sides of %s in its hour: %d before, %d after", at, before, after)
}

// TestEventRollupRebuild corrupts counters three ways and rebuilds: the
// account's counters equal the recount again, another account's are not
// touched, and a second rebuild finds nothing to correct.
func TestEventRollupRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	em := newEmitter(t)
	a, b := testfactory.Account(t, tx), testfactory.Account(t, tx)
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		for _, account := range []uuid.UUID{a, b} {
			typ := []string{events.TypeBounceSpike, events.TypeDMARCReportReceived, events.TypeComplaintSpike}[i%3]
			ex, _ := events.Lookup(typ)
			_, err := em.Emit(ctx, tx, events.Event{AccountID: account, Type: typ, Payload: ex.Example, At: base.Add(time.Duration(i) * 37 * time.Minute)})
			require.NoError(t, err)
		}
	}
	requireRollupsEqualRecount(t, tx, "after emits")

	for _, sql := range []string{
		`UPDATE event_counts_hourly SET events = events + 3 WHERE (account_id, hour, event_type, severity) IN (
			SELECT DISTINCT ON (account_id) account_id, hour, event_type, severity FROM event_counts_hourly ORDER BY account_id, hour)`,
		`DELETE FROM event_counts_hourly WHERE (account_id, hour, event_type, severity) IN (
			SELECT DISTINCT ON (account_id) account_id, hour, event_type, severity FROM event_counts_hourly ORDER BY account_id, hour DESC)`,
		`INSERT INTO event_counts_hourly (account_id, hour, event_type, severity, events)
			SELECT id, '2026-01-01T05:00:00Z', 'bounce_spike', 'info', 9 FROM accounts WHERE id = ANY($1)`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, []uuid.UUID{a, b})
		}
		_, err := tx.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	require.NotEqual(t, recountCounters(t, tx), rollupCounters(t, tx))

	n, err := events.RebuildRollups(ctx, tx, a)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "one counter too high, one missing, one with no event")
	only := func(list []counter, account uuid.UUID) []counter {
		var out []counter
		for _, c := range list {
			if c.Account == account {
				out = append(out, c)
			}
		}
		return out
	}
	require.Equal(t, only(recountCounters(t, tx), a), only(rollupCounters(t, tx), a))
	require.NotEqual(t, only(recountCounters(t, tx), b), only(rollupCounters(t, tx), b), "another account's counters are its own rebuild's")

	n, err = events.RebuildRollups(ctx, tx, b)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	requireRollupsEqualRecount(t, tx, "after both rebuilds")
	n, err = events.RebuildRollups(ctx, tx, a)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to correct")

	// The daily counters drift on their own (the hourly ones are right):
	// one too high, one missing, one with no event; only a's are corrected.
	for _, sql := range []string{
		`UPDATE event_counts_daily SET events = events + 2 WHERE (account_id, day, event_type, severity) IN (
			SELECT DISTINCT ON (account_id) account_id, day, event_type, severity FROM event_counts_daily ORDER BY account_id, day)`,
		`DELETE FROM event_counts_daily WHERE (account_id, day, event_type, severity) IN (
			SELECT DISTINCT ON (account_id) account_id, day, event_type, severity FROM event_counts_daily ORDER BY account_id, day DESC)`,
		`INSERT INTO event_counts_daily (account_id, day, event_type, severity, events)
			SELECT id, '2026-01-01', 'bounce_spike', 'info', 4 FROM accounts WHERE id = ANY($1)`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, []uuid.UUID{a, b})
		}
		_, err := tx.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	n, err = events.RebuildRollups(ctx, tx, a)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "one daily counter too high, one missing, one with no event")
	require.Equal(t, only(recountDaily(t, tx), a), only(dailyCounters(t, tx), a))
	require.NotEqual(t, only(recountDaily(t, tx), b), only(dailyCounters(t, tx), b))
	n, err = events.RebuildRollups(ctx, tx, b)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	requireRollupsEqualRecount(t, tx, "after the daily rebuilds")
}

// waitForLockWait returns once another session whose query contains
// query is waiting for a lock; it fails if done (the waiting side's
// result) comes first.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, query string, done <-chan error) {
	t.Helper()
	for {
		select {
		case err := <-done:
			t.Fatalf("%q finished without waiting for a lock: %v", query, err)
		default:
		}
		var waiting bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
			AND strpos(query, $1) > 0)`, query).Scan(&waiting))
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventRollupRebuildWaitsForWriters: a rebuild waits for an insert or
// a delete of the account's events in flight, and an insert or a delete
// that comes while a rebuild is in flight waits for it; the counters equal
// the recount after each (each time the rebuild also had a corruption to
// correct).
func TestEventRollupRebuildWaitsForWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	em := newEmitter(t)
	account := testfactory.Account(t, pool)
	at := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	emit := func(db dbutil.Executor) uuid.UUID {
		ex, _ := events.Lookup(events.TypeDMARCReportReceived)
		row, err := em.Emit(ctx, db.(pgx.Tx), events.Event{AccountID: account, Type: ex.Name, Payload: ex.Example, At: at})
		require.NoError(t, err)
		at = at.Add(13 * time.Minute)
		return row.ID
	}
	begin := func(t *testing.T) pgx.Tx { // rolled back when t ends, unless committed
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return tx
	}
	var ids []uuid.UUID
	for range 10 {
		tx := begin(t)
		ids = append(ids, emit(tx))
		require.NoError(t, tx.Commit(ctx))
	}
	corrupt := func() {
		_, err := pool.Exec(ctx, "UPDATE event_counts_hourly SET events = events + 1 WHERE account_id = $1", account)
		require.NoError(t, err)
	}
	rebuild := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			n, err := events.RebuildRollups(ctx, pool, account)
			if err == nil && n == 0 {
				err = errors.New("the rebuild corrected nothing")
			}
			done <- err
		}()
		return done
	}

	t.Run("InsertInFlight", func(t *testing.T) {
		corrupt()
		writer := begin(t)
		emit(writer) // in an hour without a counter yet: only the account's lock holds the rebuild
		done := rebuild()
		waitForLockWait(t, pool, "event_counts_hourly_rebuild", done)
		require.NoError(t, writer.Commit(ctx))
		require.NoError(t, <-done)
		requireRollupsEqualRecount(t, pool, "insert in flight")
	})
	t.Run("DeleteInFlight", func(t *testing.T) {
		corrupt()
		writer := begin(t)
		_, err := writer.Exec(ctx, "DELETE FROM events WHERE id = $1", ids[0])
		require.NoError(t, err)
		done := rebuild()
		waitForLockWait(t, pool, "event_counts_hourly_rebuild", done)
		require.NoError(t, writer.Commit(ctx))
		require.NoError(t, <-done)
		requireRollupsEqualRecount(t, pool, "delete in flight")
	})
	for _, tc := range []struct {
		name, query string
		write       func(tx pgx.Tx) error
	}{
		{"InsertWaits", "INSERT INTO events", func(tx pgx.Tx) error { emit(tx); return nil }},
		{"DeleteWaits", "DELETE FROM events", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "DELETE FROM events WHERE id = $1", ids[1])
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			corrupt()
			rb := begin(t)
			n, err := events.RebuildRollups(ctx, rb, account)
			require.NoError(t, err)
			require.Positive(t, n)
			done := make(chan error, 1)
			go func() {
				done <- dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error { return tc.write(tx) })
			}()
			waitForLockWait(t, pool, tc.query, done)
			require.NoError(t, rb.Commit(ctx))
			require.NoError(t, <-done)
			requireRollupsEqualRecount(t, pool, tc.name)
		})
	}
	t.Run("RepeatableReadRefused", func(t *testing.T) {
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = events.RebuildRollups(ctx, tx, account)
		require.ErrorContains(t, err, "READ COMMITTED")
	})
}

// TestEventCountsReadWholeDays: a window's whole UTC days are read from the
// daily counters, not from their 24 hourly ones: with the hourly counters
// of the whole days removed behind the daily ones' back, the readers still
// answer what the raw rows say; the partial days still read their hours
// and their partial hours' raw rows.
func TestEventCountsReadWholeDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	em := newEmitter(t)
	account := testfactory.Account(t, tx)
	base := time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)
	for i := range 90 { // every 53 minutes over 3.3 days
		ex, _ := events.Lookup(events.TypeBounceSpike)
		_, err := em.Emit(ctx, tx, events.Event{AccountID: account, Type: ex.Name, Payload: ex.Example,
			At: base.Add(time.Duration(i)*53*time.Minute + 7*time.Second)})
		require.NoError(t, err)
	}
	from, until := base.Add(5*time.Hour+30*time.Minute), base.Add(3*24*time.Hour+2*time.Hour+20*time.Minute)
	want := rawByDay(t, tx, account, from, until)
	_, err := tx.Exec(ctx, `SELECT set_config('mailwatch.rollup_bulk', 'on', true)`)
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, `DELETE FROM event_counts_hourly WHERE account_id = $1 AND hour >= $2 AND hour < $3`,
		account, base.AddDate(0, 0, 1), base.AddDate(0, 0, 3))
	require.NoError(t, err)
	require.Positive(t, tag.RowsAffected())
	_, err = tx.Exec(ctx, `SELECT set_config('mailwatch.rollup_bulk', 'off', true)`)
	require.NoError(t, err)

	got, err := events.CountByDay(ctx, tx, account, from, until)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, want, got)
	vol, err := events.DailyVolume(ctx, tx, account, base.AddDate(0, 0, 1), 2)
	require.NoError(t, err)
	require.Equal(t, want[1].Events, vol[0].Total())
	require.Equal(t, want[2].Events, vol[1].Total())
}

// TestEventCountWritersOfOneHourDoNotWait: two transactions on connections
// of different slots emit an event of one account, type, severity and hour
// while both are open: the second commits without waiting for the first's
// counter rows (with one row per key it waited for the first's commit and
// hit its lock_timeout). Then a writer of a third slot deletes the second
// event, leaving a negative slot row: the sums stay exact, and a rebuild
// folds the slots without a key to correct.
func TestEventCountWritersOfOneHourDoNotWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	em := newEmitter(t)
	account := testfactory.Account(t, pool)
	at := time.Date(2026, 4, 1, 10, 1, 0, 0, time.UTC)
	ex, _ := events.Lookup(events.TypeDMARCReportReceived)
	emit := func(tx pgx.Tx) uuid.UUID {
		row, err := em.Emit(ctx, tx, events.Event{AccountID: account, Type: ex.Name, Payload: ex.Example, At: at})
		require.NoError(t, err)
		return row.ID
	}
	conns := dbtest.SlotConns(t, pool, 3)

	first, err := conns[0].Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	emit(first)

	_, err = conns[1].Exec(ctx, `SET lock_timeout = '2s'`)
	require.NoError(t, err)
	var second uuid.UUID
	require.NoError(t, dbutil.WithTx(ctx, conns[1], func(ctx context.Context, tx pgx.Tx) error {
		second = emit(tx)
		return nil
	}), "the second writer of the hour commits while the first is open")
	_, err = conns[1].Exec(ctx, `RESET lock_timeout`)
	require.NoError(t, err)
	require.NoError(t, first.Commit(ctx))
	requireRollupsEqualRecount(t, pool, "after both writers")

	_, err = conns[2].Exec(ctx, `DELETE FROM events WHERE id = $1`, second)
	require.NoError(t, err)
	requireRollupsEqualRecount(t, pool, "after a delete from another slot")
	var negative int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM event_counts_hourly WHERE events < 0)
		+ (SELECT count(*) FROM event_counts_daily WHERE events < 0)`).Scan(&negative))
	require.Equal(t, 2, negative, "the deleting slot's hourly and daily rows")
	got, err := events.CountByDay(ctx, pool, account, at.Add(-time.Hour), at.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.EqualValues(t, 1, got[0].Events)

	n, err := events.RebuildRollups(ctx, pool, account)
	require.NoError(t, err)
	require.Zero(t, n, "the sums were right")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM event_counts_hourly WHERE slot <> 0)
		+ (SELECT count(*) FROM event_counts_daily WHERE slot <> 0)`).Scan(&rows))
	require.Zero(t, rows, "the rebuild folds the slots into slot 0")
	requireRollupsEqualRecount(t, pool, "after the rebuild")
}
