package events_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/alerts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// openCounts are the dashboard summary's counts of one account: from the
// counters (what the summary reads) or recounted from the raw rows.
type openCounts struct {
	Alerts                    int64
	Pending, Retrying, Failed int64
}

func counterOpenCounts(t *testing.T, db dbutil.Executor, account uuid.UUID) openCounts {
	t.Helper()
	ctx := context.Background()
	q := dbsqlc.New()
	alerts, err := q.EventCountUnacknowledgedAlerts(ctx, db, account)
	require.NoError(t, err)
	d, err := q.DeliveryCountOpen(ctx, db, account)
	require.NoError(t, err)
	return openCounts{Alerts: alerts, Pending: d.Pending, Retrying: d.Retrying, Failed: d.Failed}
}

func rawOpenCounts(t *testing.T, db dbutil.Executor, account uuid.UUID) openCounts {
	t.Helper()
	var c openCounts
	require.NoError(t, db.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM events WHERE account_id = $1 AND severity = 'critical' AND acknowledged_at IS NULL),
		(SELECT count(*) FROM webhook_deliveries WHERE account_id = $1 AND status = 'pending'),
		(SELECT count(*) FROM webhook_deliveries WHERE account_id = $1 AND status = 'retrying'),
		(SELECT count(*) FROM webhook_deliveries WHERE account_id = $1 AND status = 'failed')`, account).
		Scan(&c.Alerts, &c.Pending, &c.Retrying, &c.Failed))
	return c
}

// openFixture writes alerts and deliveries of accounts the way their
// capabilities do (the emitter, internal/alerts, status updates of
// webhook_deliveries), each write on one of several connections so that
// the counters' slots differ.
type openFixture struct {
	pool  *pgxpool.Pool
	em    *events.Emitter
	rng   *rand.Rand
	base  time.Time
	conns []*pgxpool.Conn
	subs  map[uuid.UUID]uuid.UUID // account -> subscription
}

func newOpenFixture(t *testing.T, pool *pgxpool.Pool, accounts []uuid.UUID) *openFixture {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	f := &openFixture{pool: pool, em: newEmitter(t), rng: rand.New(rand.NewPCG(seed, 43)),
		base: time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC), subs: map[uuid.UUID]uuid.UUID{}}
	for range 4 {
		c, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		t.Cleanup(c.Release)
		f.conns = append(f.conns, c)
	}
	for _, a := range accounts {
		sub := uuid.New()
		f.exec(t, `INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
			VALUES ($1, $2, 'https://hooks.example.com/', '\x00', 'k')`, sub, a)
		f.subs[a] = sub
	}
	return f
}

func (f *openFixture) conn() *pgxpool.Conn { return f.conns[f.rng.IntN(len(f.conns))] }

func (f *openFixture) exec(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	tag, err := f.conn().Exec(context.Background(), sql, args...)
	require.NoError(t, err)
	return tag.RowsAffected()
}

// emit emits ev through the production emitter, in a transaction of its
// own on one of the connections.
func (f *openFixture) emit(t *testing.T, ev events.Event) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.conn().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = f.em.Emit(ctx, tx, ev)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func (f *openFixture) at() time.Time {
	return f.base.Add(time.Duration(f.rng.Int64N(int64(72 * time.Hour))))
}

// step makes one random change to account: an event of any severity, an
// acknowledgement or its withdrawal, a new delivery, a status change, a
// deleted delivery or event.
func (f *openFixture) step(t *testing.T, account uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	statuses := []string{"pending", "retrying", "delivered", "failed"}
	switch f.rng.IntN(7) {
	case 0, 1:
		typ := []string{events.TypeBounceSpike, events.TypeDMARCReportReceived, events.TypeMXVerificationLost}[f.rng.IntN(3)]
		ex, _ := events.Lookup(typ)
		sev := []events.Severity{"", events.SeverityInfo, events.SeverityCritical}[f.rng.IntN(3)]
		f.emit(t, events.Event{AccountID: account, Type: typ, Severity: sev, Payload: ex.Example, At: f.at()})
	case 2:
		var id uuid.UUID
		var acked bool
		err := f.conn().QueryRow(ctx, `SELECT id, acknowledged_at IS NOT NULL FROM events
			WHERE account_id = $1 AND severity = 'critical' ORDER BY random() LIMIT 1`, account).Scan(&id, &acked)
		if err != nil {
			return // no alert yet
		}
		if acked {
			_, err = alerts.Unacknowledge(ctx, f.conn(), f.em, account, id, "mw_test", f.at())
		} else {
			_, err = alerts.Acknowledge(ctx, f.conn(), f.em, account, id, alerts.Acknowledgement{By: "ops", KeyIdentifier: "mw_test"}, f.at())
		}
		require.NoError(t, err)
	case 3:
		f.exec(t, `INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body, status)
			VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00', $5)`,
			v7At(f.at()), account, f.subs[account], uuid.New(), statuses[f.rng.IntN(len(statuses))])
	case 4, 5:
		f.exec(t, `UPDATE webhook_deliveries SET status = $2 WHERE id = (
			SELECT id FROM webhook_deliveries WHERE account_id = $1 ORDER BY random() LIMIT 1)`,
			account, statuses[f.rng.IntN(len(statuses))])
	case 6:
		table := []string{"webhook_deliveries", "events"}[f.rng.IntN(2)]
		f.exec(t, `DELETE FROM `+table+` WHERE id = (SELECT id FROM `+table+` WHERE account_id = $1 ORDER BY random() LIMIT 1)`, account)
	}
}

// TestOpenCountsEqualRecount: after a randomized stream of alerts,
// acknowledgements, deliveries changing status and deletions, written on
// several connections (so several slots), the dashboard summary's counts
// read from the counters equal the raw rows' counts; an account deleted
// leaves no counter behind.
func TestOpenCountsEqualRecount(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	accounts := []uuid.UUID{testfactory.Account(t, pool), testfactory.Account(t, pool), testfactory.Account(t, pool)}
	f := newOpenFixture(t, pool, accounts)
	for round := range 6 {
		for range 40 {
			f.step(t, accounts[f.rng.IntN(len(accounts))])
		}
		for _, a := range accounts {
			require.Equal(t, rawOpenCounts(t, pool, a), counterOpenCounts(t, pool, a), "round %d", round)
		}
		var zero int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM alert_open_counts WHERE alerts = 0)
			+ (SELECT count(*) FROM delivery_open_counts WHERE deliveries = 0)`).Scan(&zero))
		require.Zero(t, zero, "no counter row left at zero")
	}
	var open int64
	for _, a := range accounts {
		c := rawOpenCounts(t, pool, a)
		open += c.Alerts + c.Pending + c.Retrying + c.Failed
	}
	require.Positive(t, open, "the stream left open work to count")

	_, err := dbsqlc.New().AccountDelete(context.Background(), pool, accounts[2])
	require.NoError(t, err)
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM alert_open_counts WHERE account_id = $1)
		+ (SELECT count(*) FROM delivery_open_counts WHERE account_id = $1)`, accounts[2]).Scan(&left))
	require.Zero(t, left)
	for _, a := range accounts[:2] {
		require.Equal(t, rawOpenCounts(t, pool, a), counterOpenCounts(t, pool, a))
	}
}

// TestOpenCountsRebuild: counters that drifted (one too high, one missing,
// one with nothing behind it) are corrected by RebuildOpenCounts, for its
// account only; a rebuild waits for a writer of its account in flight and
// counts what it committed.
func TestOpenCountsRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	a, b := testfactory.Account(t, pool), testfactory.Account(t, pool)
	f := newOpenFixture(t, pool, []uuid.UUID{a, b})
	for _, account := range []uuid.UUID{a, b} {
		for i := range 3 {
			ex, _ := events.Lookup(events.TypeMXVerificationLost)
			f.emit(t, events.Event{AccountID: account, Type: events.TypeMXVerificationLost,
				Severity: events.SeverityCritical, Payload: ex.Example, At: f.base.Add(time.Duration(i) * time.Hour)})
			f.exec(t, `INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body, status)
				VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00', 'failed')`,
				v7At(f.base.Add(time.Duration(i)*time.Hour)), account, f.subs[account], uuid.New())
		}
	}
	for _, sql := range []string{
		`UPDATE alert_open_counts SET alerts = alerts + 3 WHERE (account_id, hour) IN (
			SELECT DISTINCT ON (account_id) account_id, hour FROM alert_open_counts ORDER BY account_id, hour)`,
		`DELETE FROM delivery_open_counts WHERE (account_id, hour) IN (
			SELECT DISTINCT ON (account_id) account_id, hour FROM delivery_open_counts ORDER BY account_id, hour DESC)`,
		`INSERT INTO delivery_open_counts (account_id, hour, status, slot, deliveries)
			SELECT id, '2026-01-01T05:00:00Z', 'pending', 0, 9 FROM accounts WHERE id = ANY($1)`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, []uuid.UUID{a, b})
		}
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// Each alert was pushed to the subscription too (a pending delivery).
	want := openCounts{Alerts: 3, Pending: 3, Failed: 3}
	require.Equal(t, want, rawOpenCounts(t, pool, a))
	require.NotEqual(t, want, counterOpenCounts(t, pool, a))

	n, err := events.RebuildOpenCounts(ctx, pool, a)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "one counter too high, one missing, one with nothing behind it")
	require.Equal(t, want, counterOpenCounts(t, pool, a))
	require.NotEqual(t, want, counterOpenCounts(t, pool, b), "another account's counters are its own rebuild's")
	n, err = events.RebuildOpenCounts(ctx, pool, b)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.Equal(t, want, counterOpenCounts(t, pool, b))
	n, err = events.RebuildOpenCounts(ctx, pool, a)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to correct")

	// A writer of a in flight: the rebuild waits for it, then counts it.
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, `INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body)
		VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00')`, v7At(f.base), a, f.subs[a], uuid.New())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := events.RebuildOpenCounts(ctx, pool, a)
		done <- err
	}()
	waitForLockWait(t, pool, "open_counts_rebuild", done)
	require.NoError(t, writer.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, openCounts{Alerts: 3, Pending: 4, Failed: 3}, counterOpenCounts(t, pool, a))
	require.Equal(t, rawOpenCounts(t, pool, a), counterOpenCounts(t, pool, a))
}

// v7At is a UUIDv7 of the time at, with random low bits.
func v7At(at time.Time) uuid.UUID {
	id := dbutil.UUIDv7Floor(at)
	tail := uuid.New()
	copy(id[9:], tail[9:])
	return id
}
