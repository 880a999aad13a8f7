package partitions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// monday is a Monday noon: message_events partitions are weeks from Monday.
var monday = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

// settings keeps events for a week (message events for the spike checks'
// week and an hour).
var settings = partitions.Settings{EventRetentionDays: 7}

type fixture struct {
	t        *testing.T
	pool     *pgxpool.Pool
	account  uuid.UUID
	provider uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	f := &fixture{t: t, pool: pool, account: testfactory.Account(t, pool), provider: uuid.New()}
	f.exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'sendgrid', 'sg', '\x00', 'k')`, f.provider, f.account)
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	_, err := f.pool.Exec(context.Background(), sql, args...)
	require.NoError(f.t, err)
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (f *fixture) exists(table string) bool {
	f.t.Helper()
	var ok bool
	require.NoError(f.t, f.pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok))
	return ok
}

// messageEvent stores a message event that occurred at at.
func (f *fixture) messageEvent(at time.Time) {
	f.t.Helper()
	f.exec(`INSERT INTO message_events (id, account_id, provider_id, provider_kind, event_id, event_type, recipient,
		recipient_hash, occurred_at) VALUES ($1, $2, $3, 'sendgrid', $4, 'delivered', 'a@example.com', '\x00', $5)`,
		uuid.New(), f.account, f.provider, uuid.NewString(), at)
}

func (f *fixture) maintain(now time.Time, specs ...partitions.Spec) partitions.Report {
	f.t.Helper()
	if specs == nil {
		specs = partitions.Tables
	}
	rep, err := partitions.MaintainSpecs(context.Background(), f.pool, now, settings, specs)
	require.NoError(f.t, err)
	require.Empty(f.t, rep.Skipped)
	return rep
}

// partitionOf names the partition holding the message events at at.
func (f *fixture) partitionOf(at time.Time) string {
	f.t.Helper()
	var name string
	require.NoError(f.t, f.pool.QueryRow(context.Background(),
		`SELECT tableoid::regclass::text FROM message_events WHERE occurred_at = $1 LIMIT 1`, at).Scan(&name))
	return name
}

func spec(t *testing.T, table string) partitions.Spec {
	t.Helper()
	s, ok := partitions.Lookup(table)
	require.True(t, ok)
	return s
}

// TestRetentionDropsPartition fills three weeks of message events, moves
// the clock past the first week's retention, and checks that the first
// week's partition is gone with its rows and its rollup hours, the later
// weeks are intact, and no row was deleted: a trigger on the partition
// records every DELETE and TRUNCATE, and records none.
func TestRetentionDropsPartition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.maintain(monday) // this week and two ahead
	weeks := []time.Time{monday, monday.AddDate(0, 0, 7), monday.AddDate(0, 0, 14)}
	for _, w := range weeks {
		for h := range 3 {
			f.messageEvent(w.Add(time.Duration(h) * 24 * time.Hour))
		}
	}
	first := "message_events_p20260105"
	require.Equal(t, first, f.partitionOf(monday))

	f.exec(`CREATE TABLE deletions (tbl text, op text)`)
	f.exec(`CREATE FUNCTION record_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO deletions VALUES (TG_TABLE_NAME, TG_OP); RETURN OLD; END $$`)
	f.exec(`CREATE TRIGGER record_delete BEFORE DELETE ON ` + first + ` FOR EACH ROW EXECUTE FUNCTION record_deletion()`)
	f.exec(`CREATE TRIGGER record_truncate BEFORE TRUNCATE ON ` + first + ` FOR EACH STATEMENT EXECUTE FUNCTION record_deletion()`)
	// A rollup of the table: its hours in the dropped week go with it.
	f.exec(`CREATE TABLE test_hourly (account_id uuid NOT NULL, hour timestamptz NOT NULL, n int NOT NULL)`)
	for _, w := range weeks {
		f.exec(`INSERT INTO test_hourly VALUES ($1, $2, 1), ($1, $3, 1)`, f.account, w.Truncate(time.Hour), w.AddDate(0, 0, 6).Add(11*time.Hour))
	}
	s := spec(t, "message_events")
	s.Rollups = []string{"test_hourly"}

	// The first week ends on 12 January; message events are kept for a week
	// and an hour (the spike checks' window and baseline).
	keep := partitions.MessageEventRetention(settings)
	require.Equal(t, 7*24*time.Hour+time.Hour, keep)
	justBefore := weeks[1].Truncate(24 * time.Hour).Add(keep - time.Minute)
	rep := f.maintain(justBefore, s)
	require.Empty(t, rep.Dropped, "the week's last rows are not past the retention yet")
	require.True(t, f.exists(first))

	dailyBefore := f.count(`SELECT (SELECT count(*) FROM message_event_domain_daily WHERE day < $1::date) +
		(SELECT count(*) FROM message_event_account_daily WHERE day < $1::date)`, weeks[1])
	require.Positive(t, dailyBefore)
	dailyAfter := f.count(`SELECT count(*) FROM message_event_account_daily WHERE day >= $1::date`, weeks[1])
	rep = f.maintain(justBefore.Add(2*time.Minute), s)
	require.Equal(t, []string{first}, rep.Dropped)
	// The daily rollups (Spec.Daily) lose the week's days in one delete each,
	// and keep the later days' counts.
	require.Zero(t, f.count(`SELECT (SELECT count(*) FROM message_event_domain_daily WHERE day < $1::date) +
		(SELECT count(*) FROM message_event_account_daily WHERE day < $1::date)`, weeks[1]))
	require.Equal(t, dailyAfter, f.count(`SELECT count(*) FROM message_event_account_daily WHERE day >= $1::date`, weeks[1]))
	require.False(t, f.exists(first), "the partition table is gone")
	require.Zero(t, f.count(`SELECT count(*) FROM message_events WHERE occurred_at < $1`, weeks[1]), "its rows are gone")
	require.Equal(t, 6, f.count(`SELECT count(*) FROM message_events WHERE occurred_at >= $1`, weeks[1]), "the later weeks' rows remain")
	require.Zero(t, f.count(`SELECT count(*) FROM deletions`), "no row was deleted or truncated: the partition was dropped")
	require.Zero(t, f.count(`SELECT count(*) FROM test_hourly WHERE hour < $1`, weeks[1]), "the week's rollup hours are gone")
	require.Equal(t, 4, f.count(`SELECT count(*) FROM test_hourly WHERE hour >= $1`, weeks[1]), "later rollup hours remain")
	require.EqualValues(t, 2+dailyBefore, rep.RollupRows)
}

// TestRetentionKeepsRows drops a day of provider payloads: the payload
// never normalised (Spec.Keep) survives in the DEFAULT partition, the
// processed ones go with the partition.
func TestRetentionKeepsRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	day := monday.Truncate(24 * time.Hour)
	f.maintain(day)
	payload := func(at time.Time, processed bool) uuid.UUID {
		id := dbutil.UUIDv7Floor(at)
		tail := uuid.New()
		copy(id[9:], tail[9:])
		var done *time.Time
		if processed {
			done = &at
		}
		f.exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body, processed_at)
			VALUES ($1, $2, $3, $4, '\x00', '{}', $5)`, id, f.provider, f.account, id.String(), done)
		return id
	}
	done1, done2 := payload(day.Add(time.Hour), true), payload(day.Add(2*time.Hour), true)
	open := payload(day.Add(3*time.Hour), false)
	next := payload(day.AddDate(0, 0, 1).Add(time.Hour), true)
	p := "provider_payloads_p20260105"
	require.Equal(t, 3, f.count(`SELECT count(*) FROM `+p))

	rep := f.maintain(day.AddDate(0, 0, 1).Add(partitions.PayloadRetention(settings)))
	require.Contains(t, rep.Dropped, p)
	require.False(t, f.exists(p))
	require.EqualValues(t, 1, rep.Kept)
	require.Zero(t, f.count(`SELECT count(*) FROM provider_payloads WHERE id = ANY($1)`, []uuid.UUID{done1, done2}))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM provider_payloads_default WHERE id = $1 AND processed_at IS NULL`, open),
		"the unprocessed payload is kept, in the DEFAULT partition")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM provider_payloads WHERE id = $1`, next))
}

// TestEnsureIsIdempotent: the current partition and the ones ahead exist
// after a run, a second run changes nothing, and a week later exactly the
// week that came into the window is added.
func TestEnsureIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rep := f.maintain(monday)
	require.Contains(t, rep.Created, "message_events_p20260105")
	require.Contains(t, rep.Created, "message_events_p20260112")
	require.Contains(t, rep.Created, "message_events_p20260119")
	require.Contains(t, rep.Created, "provider_payloads_p20260108", "days ahead of the payloads' partition")
	require.Contains(t, rep.Created, "events_p20260119")
	require.Contains(t, rep.Created, "webhook_deliveries_p20260119")
	require.Contains(t, rep.Created, "webhook_delivery_attempts_p20260119")
	require.Contains(t, rep.Created, "dmarc_records_p20260301", "months ahead of the DMARC records' partition")
	require.Len(t, rep.Created, 3+4+3+3+3+3)

	again := f.maintain(monday.Add(time.Hour))
	require.Empty(t, again.Created)
	require.Empty(t, again.Dropped)

	later := f.maintain(monday.AddDate(0, 0, 7))
	require.Contains(t, later.Created, "message_events_p20260126")
	parts, err := partitions.List(context.Background(), f.pool, spec(t, "message_events"))
	require.NoError(t, err)
	var bounds []string
	for _, p := range parts {
		if p.Default {
			continue
		}
		bounds = append(bounds, p.From.Format("01-02")+"/"+p.To.Format("01-02"))
	}
	require.Equal(t, []string{"01-05/01-12", "01-12/01-19", "01-19/01-26", "01-26/02-02"}, bounds,
		"contiguous weeks, none twice")
}

// TestDefaultPartitionRows: rows of no partition's range land in the
// DEFAULT partition; creating a partition while it holds rows of another
// range works, and rows of the new partition's range are moved into it.
func TestDefaultPartitionRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.maintain(monday) // weeks of 5, 12 and 19 January
	// A counter kept by statement triggers on the table, as a rollup is: a
	// move out of the DEFAULT partition must leave it equal to a recount.
	f.exec(`CREATE TABLE counted (n bigint NOT NULL)`)
	f.exec(`INSERT INTO counted VALUES (0)`)
	f.exec(`CREATE FUNCTION count_in() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN UPDATE counted SET n = n + (SELECT count(*) FROM new_rows); RETURN NULL; END $$`)
	f.exec(`CREATE FUNCTION count_out() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN UPDATE counted SET n = n - (SELECT count(*) FROM old_rows); RETURN NULL; END $$`)
	f.exec(`CREATE TRIGGER count_in AFTER INSERT ON message_events REFERENCING NEW TABLE AS new_rows
		FOR EACH STATEMENT EXECUTE FUNCTION count_in()`)
	f.exec(`CREATE TRIGGER count_out AFTER DELETE ON message_events REFERENCING OLD TABLE AS old_rows
		FOR EACH STATEMENT EXECUTE FUNCTION count_out()`)
	soon := time.Date(2026, 1, 27, 8, 0, 0, 0, time.UTC)
	far := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	past := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC) // a payload without a timestamp
	for _, at := range []time.Time{soon, soon.Add(time.Hour), far, past} {
		f.messageEvent(at)
	}
	require.Equal(t, "message_events_default", f.partitionOf(soon))
	require.Equal(t, "message_events_default", f.partitionOf(far))

	rep := f.maintain(monday.AddDate(0, 0, 7)) // brings the week of 26 January in
	require.Contains(t, rep.Created, "message_events_p20260126")
	require.EqualValues(t, 2, rep.Moved)
	require.Equal(t, "message_events_p20260126", f.partitionOf(soon), "moved into its new partition")
	require.Equal(t, 2, f.count(`SELECT count(*) FROM message_events_p20260126`))
	require.Equal(t, "message_events_default", f.partitionOf(far), "another range stays where it was")
	require.Equal(t, "message_events_default", f.partitionOf(past))
	require.Equal(t, 4, f.count(`SELECT count(*) FROM message_events`), "no row lost")
	require.Equal(t, 4, f.count(`SELECT n FROM counted`), "the table's triggers saw the rows leave and come back")
}

// v7 returns a UUIDv7 made at at.
func v7(at time.Time) uuid.UUID {
	id := dbutil.UUIDv7Floor(at)
	tail := uuid.New()
	copy(id[9:], tail[9:])
	return id
}

// TestRetentionKeepsUnacknowledgedAlerts drops a week of events with their
// deliveries and attempts: the alert nobody acknowledged survives (in the
// DEFAULT partition, where it can still be acknowledged), the other events
// of the week go with the partition, and no row is deleted one by one.
func TestRetentionKeepsUnacknowledgedAlerts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.maintain(monday)
	events := spec(t, "events") // its rollup is event_counts_hourly, kept by its triggers
	specs := []partitions.Spec{spec(t, "webhook_delivery_attempts"), spec(t, "webhook_deliveries")}
	specs = append([]partitions.Spec{events}, specs...)
	sub := uuid.New()
	f.exec(`INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'https://hooks.example.com/', '\x00', 'k')`, sub, f.account)
	event := func(at time.Time, severity string, acked bool) uuid.UUID {
		id := v7(at)
		var ackAt *time.Time
		if acked {
			ackAt = &at
		}
		f.exec(`INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at, acknowledged_at)
			VALUES ($1, $2, 'health_score_changed', $3, '{}', '{}', $4, $5)`, id, f.account, severity, at, ackAt)
		delivery := v7(at.Add(time.Millisecond))
		f.exec(`INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body)
			VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00')`, delivery, f.account, sub, id)
		f.exec(`INSERT INTO webhook_delivery_attempts (id, delivery_id, started_at) VALUES ($1, $2, $3)`, uuid.New(), delivery, at)
		return id
	}
	info := event(monday.Add(time.Hour), "info", false)
	acked := event(monday.Add(2*time.Hour), "critical", true)
	unacked := event(monday.Add(3*time.Hour), "critical", false)
	later := event(monday.AddDate(0, 0, 7), "critical", false)
	for _, p := range []string{"events_p20260105", "webhook_deliveries_p20260105", "webhook_delivery_attempts_p20260105"} {
		require.Equal(t, 3, f.count(`SELECT count(*) FROM `+p), p)
	}
	f.exec(`CREATE TABLE deletions (tbl text)`)
	f.exec(`CREATE FUNCTION record_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO deletions VALUES (TG_TABLE_NAME); RETURN OLD; END $$`)
	for _, p := range []string{"events_p20260105", "webhook_deliveries_p20260105", "webhook_delivery_attempts_p20260105"} {
		f.exec(`CREATE TRIGGER record_delete BEFORE DELETE ON ` + p + ` FOR EACH ROW EXECUTE FUNCTION record_deletion()`)
	}

	const dailyKeys = `SELECT count(DISTINCT (account_id, day, event_type, severity)) FROM event_counts_daily`
	require.Equal(t, 3, f.count(dailyKeys), "the week's info and critical counters, the later week's")
	// The week's counter rows: a key has a row per slot its writers used.
	weekRows := f.count(`SELECT (SELECT count(*) FROM event_counts_hourly WHERE hour < '2026-01-12')
		+ (SELECT count(*) FROM event_counts_daily WHERE day < '2026-01-12')`)
	require.GreaterOrEqual(t, weekRows, 3+2)
	// The open counters: the week's unacknowledged alert and its three
	// pending deliveries (one per hour).
	openRows := f.count(`SELECT (SELECT count(*) FROM alert_open_counts WHERE hour < '2026-01-12')
		+ (SELECT count(*) FROM delivery_open_counts WHERE hour < '2026-01-12')`)
	require.Equal(t, 1+3, openRows)
	require.Equal(t, 2, f.count(`SELECT sum(alerts)::int FROM alert_open_counts`), "the week's open alert and the later one")
	require.Equal(t, 4, f.count(`SELECT sum(deliveries)::int FROM delivery_open_counts WHERE status = 'pending'`))
	f.exec(`CREATE TABLE daily_updates (op text)`)
	f.exec(`CREATE FUNCTION record_daily_update() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO daily_updates VALUES (TG_OP); RETURN NULL; END $$`)
	f.exec(`CREATE TRIGGER record_daily_update AFTER UPDATE OR DELETE ON event_counts_daily
		FOR EACH ROW EXECUTE FUNCTION record_daily_update()`)

	// The week ends on 12 January; events are kept 7 days.
	rep := f.maintain(time.Date(2026, 1, 19, 0, 0, 0, 0, time.UTC), specs...)
	require.Subset(t, rep.Dropped, []string{"events_p20260105", "webhook_deliveries_p20260105", "webhook_delivery_attempts_p20260105"})
	require.EqualValues(t, 1, rep.Kept)
	for _, p := range []string{"events_p20260105", "webhook_deliveries_p20260105", "webhook_delivery_attempts_p20260105"} {
		require.False(t, f.exists(p), p)
	}
	require.Zero(t, f.count(`SELECT count(*) FROM deletions`), "nothing deleted row by row")
	require.Zero(t, f.count(`SELECT count(*) FROM events WHERE id = ANY($1)`, []uuid.UUID{info, acked}))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM events_default WHERE id = $1 AND created_at = $2`, unacked, monday.Add(3*time.Hour)),
		"the unacknowledged alert is kept as it was, in the DEFAULT partition")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM events WHERE id = $1`, later))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM webhook_deliveries`), "the later week's delivery")
	require.Zero(t, f.count(eventCountsDiffer), "the hourly event counters equal a recount: the dropped week's hours are gone and the kept alert is counted once")
	require.Equal(t, 2, f.count(`SELECT count(DISTINCT (account_id, hour, event_type, severity)) FROM event_counts_hourly`),
		"the kept alert's hour and the later week's")
	// The daily counters (Spec.Daily) lose the week's days in one delete,
	// not an update per hourly counter, and count the kept alert again.
	require.Zero(t, f.count(eventDailyCountsDiffer), "the daily event counters equal a recount")
	require.Equal(t, 2, f.count(dailyKeys), "the kept alert's day and the later week's")
	require.Zero(t, f.count(`SELECT count(*) FROM daily_updates WHERE op = 'UPDATE'`), "no daily counter was updated row by row")
	require.EqualValues(t, weekRows+openRows, rep.RollupRows,
		"the rows of the week's 3 hourly counters, 2 daily ones and 4 open counters")
	require.Zero(t, f.count(openCountsDiffer), "the open counters equal a recount: the dropped deliveries are gone and the kept alert is counted once")
	require.Equal(t, 2, f.count(`SELECT sum(alerts)::int FROM alert_open_counts`), "both open alerts are still counted")
	require.Equal(t, 1, f.count(`SELECT sum(deliveries)::int FROM delivery_open_counts`), "the later week's delivery")

	// It is still acknowledged the way the API does it.
	var n int
	require.NoError(t, f.pool.QueryRow(context.Background(), `WITH a AS (UPDATE events SET acknowledged_at = now(), acknowledged_by = 'me',
		acknowledged_key = 'k' WHERE id = $1 AND account_id = $2 AND severity = 'critical' AND acknowledged_at IS NULL RETURNING 1)
		SELECT count(*) FROM a`, unacked, f.account).Scan(&n))
	require.Equal(t, 1, n)
	require.Equal(t, 1, f.count(`SELECT sum(alerts)::int FROM alert_open_counts`), "the acknowledged alert left the count")
	require.Zero(t, f.count(openCountsDiffer))
}

// openCountsDiffer counts the keys of the open alert and delivery counters
// (the sums of their slots) that differ from a recount of the raw rows.
const openCountsDiffer = `SELECT count(*) FROM (
	(SELECT account_id, hour, 'alert', sum(alerts) FROM alert_open_counts GROUP BY 1, 2 HAVING sum(alerts) <> 0
	 UNION ALL
	 SELECT account_id, hour, status, sum(deliveries) FROM delivery_open_counts GROUP BY 1, 2, 3 HAVING sum(deliveries) <> 0)
	EXCEPT ALL
	(SELECT account_id, date_trunc('hour', created_at, 'UTC'), 'alert', count(*) FROM events
	 WHERE severity = 'critical' AND acknowledged_at IS NULL GROUP BY 1, 2
	 UNION ALL
	 SELECT account_id, date_trunc('hour', mailwatch_uuidv7_time(id), 'UTC'), status, count(*) FROM webhook_deliveries
	 WHERE status <> 'delivered' GROUP BY 1, 2, 3)
	UNION ALL
	((SELECT account_id, date_trunc('hour', created_at, 'UTC'), 'alert', count(*) FROM events
	  WHERE severity = 'critical' AND acknowledged_at IS NULL GROUP BY 1, 2
	  UNION ALL
	  SELECT account_id, date_trunc('hour', mailwatch_uuidv7_time(id), 'UTC'), status, count(*) FROM webhook_deliveries
	  WHERE status <> 'delivered' GROUP BY 1, 2, 3)
	 EXCEPT ALL
	 (SELECT account_id, hour, 'alert', sum(alerts) FROM alert_open_counts GROUP BY 1, 2 HAVING sum(alerts) <> 0
	  UNION ALL
	  SELECT account_id, hour, status, sum(deliveries) FROM delivery_open_counts GROUP BY 1, 2, 3 HAVING sum(deliveries) <> 0))) d`

// eventCountsDiffer counts the (account, hour, type, severity) keys whose
// hourly counter (the sum of the key's slots) differs from a recount of the
// raw events.
const eventCountsDiffer = `SELECT count(*) FROM (
	(SELECT account_id, hour, event_type, severity, events FROM (SELECT account_id, hour, event_type, severity, sum(events) AS events FROM event_counts_hourly GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c
	 EXCEPT SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4)
	UNION ALL
	(SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4
	 EXCEPT SELECT account_id, hour, event_type, severity, events FROM (SELECT account_id, hour, event_type, severity, sum(events) AS events FROM event_counts_hourly GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c)) d`

// eventDailyCountsDiffer is eventCountsDiffer for the daily counters.
const eventDailyCountsDiffer = `SELECT count(*) FROM (
	(SELECT account_id, day, event_type, severity, events FROM (SELECT account_id, day, event_type, severity, sum(events) AS events FROM event_counts_daily GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c
	 EXCEPT SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4)
	UNION ALL
	(SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4
	 EXCEPT SELECT account_id, day, event_type, severity, events FROM (SELECT account_id, day, event_type, severity, sum(events) AS events FROM event_counts_daily GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c)) d`

// TestDropWithChildRowsInDefault: a delivery's attempts stored while their
// week's partition did not exist sit in the attempts' DEFAULT partition and
// refer to the delivery's week; dropping that week deletes them first
// (Spec.Children), or Postgres would refuse to detach it.
func TestDropWithChildRowsInDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	deliveries, attempts := spec(t, "webhook_deliveries"), spec(t, "webhook_delivery_attempts")
	f.maintain(monday, deliveries) // the attempts' weeks are not made
	sub := uuid.New()
	f.exec(`INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'https://hooks.example.com/', '\x00', 'k')`, sub, f.account)
	delivery := v7(monday)
	f.exec(`INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body)
		VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00')`, delivery, f.account, sub, uuid.New())
	f.exec(`INSERT INTO webhook_delivery_attempts (id, delivery_id, started_at) VALUES ($1, $2, $3)`, uuid.New(), delivery, monday)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM webhook_delivery_attempts_default`))

	rep := f.maintain(time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC), attempts, deliveries)
	require.Contains(t, rep.Dropped, "webhook_deliveries_p20260105")
	require.Zero(t, f.count(`SELECT count(*) FROM webhook_delivery_attempts`))
	require.Zero(t, f.count(`SELECT count(*) FROM webhook_deliveries`))
}

// TestReadsByIDReadOnePartition: the tables partitioned by a UUIDv7 id are
// read by id, and such a read (a prepared statement's generic plan, as pgx
// runs them) scans one partition. DMARC records are written with COPY,
// which lands them in their report's month.
func TestReadsByIDReadOnePartition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	f.maintain(now)
	domain := testfactory.Domain(t, f.pool, f.account, "partitions.example")
	msg, report := v7(now), v7(now)
	f.exec(`INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw_size) VALUES ($1, $2, $3, 'dmarc', 'upload', 1)`,
		msg, f.account, domain.ID)
	f.exec(`INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at, policy_domain,
		policy, version, record_count, message_count, pass_count) VALUES ($1, $2, $3, 'o', 'r', 'e', now(), now(), 'd', '{}', '1', 1, 1, 1)`,
		report, domain.ID, msg)
	_, err := f.pool.CopyFrom(ctx, pgx.Identifier{"dmarc_records"},
		[]string{"report_id", "ordinal", "source_ip", "count", "disposition", "dkim", "spf", "header_from", "envelope_from",
			"envelope_to", "reasons", "dkim_results", "spf_results"},
		pgx.CopyFromRows([][]any{{report, int32(1), "192.0.2.1", int64(1), "none", "pass", "pass", "d", "d", "", "[]", "[]", "[]"}}))
	require.NoError(t, err)
	month := "dmarc_records_p" + partitions.Month.Start(now).Format("20060102")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM `+month+` WHERE report_id = $1`, report), "COPY routes to the report's month")

	for table, col := range map[string]string{"dmarc_records": "report_id", "webhook_deliveries": "id", "provider_payloads": "id"} {
		lines := f.explainByID(table, col, report)
		var scanned []string
		for _, l := range lines {
			if i := strings.Index(l, " on "+table+"_"); i >= 0 && strings.Contains(l, "Scan") {
				scanned = append(scanned, strings.Fields(l[i+4:])[0])
			}
		}
		require.Len(t, scanned, 1, "%s: %s", table, strings.Join(lines, "\n"))
		require.Equal(t, table+"_p"+spec(t, table).Interval.Start(now).Format("20060102"), scanned[0], "%s", strings.Join(lines, "\n"))
	}
}

// explainByID returns the lines of EXPLAIN ANALYZE of a read of table by
// col = id, as a prepared statement's generic plan.
func (f *fixture) explainByID(table, col string, id uuid.UUID) []string {
	f.t.Helper()
	ctx := context.Background()
	conn, err := f.pool.Acquire(ctx)
	require.NoError(f.t, err)
	defer conn.Release()
	defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE byid; RESET plan_cache_mode`) }()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(f.t, err)
	_, err = conn.Exec(ctx, `PREPARE byid(uuid) AS SELECT * FROM `+table+` WHERE `+col+` = $1`)
	require.NoError(f.t, err)
	rows, err := conn.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE byid('`+id.String()+`')`)
	require.NoError(f.t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(f.t, err)
	return lines
}

// TestConcurrentMaintain runs two workers' Maintain at once: they take
// turns (the advisory lock), each partition is made once, and neither
// fails.
func TestConcurrentMaintain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reps := make(chan partitions.Report, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			rep, err := partitions.Maintain(context.Background(), f.pool, monday, settings)
			reps <- rep
			errs <- err
		}()
	}
	var created []string
	for range 2 {
		require.NoError(t, <-errs)
		rep := <-reps
		require.Empty(t, rep.Skipped)
		created = append(created, rep.Created...)
	}
	require.Len(t, created, 3+4+3+3+3+3, "every partition made once, by one of them")
	require.ElementsMatch(t, created, f.maintainAgainCreated(monday), "a third run finds nothing to do")
}

// maintainAgainCreated runs Maintain at now and returns the names of every
// partition (not DEFAULT, not legacy) of every table, checking it created
// none.
func (f *fixture) maintainAgainCreated(now time.Time) []string {
	f.t.Helper()
	rep := f.maintain(now)
	require.Empty(f.t, rep.Created)
	var names []string
	for _, s := range partitions.Tables {
		parts, err := partitions.List(context.Background(), f.pool, s)
		require.NoError(f.t, err)
		for _, p := range parts {
			if !p.Default && p.From != nil {
				names = append(names, p.Name)
			}
		}
	}
	return names
}

// TestCreateKeepsChildRows: deliveries and their attempts written while no
// partition held their range (a new database before the first maintenance
// run) sit in the DEFAULT partitions; making the partitions moves them, and
// moving a delivery must not cascade to its attempts.
func TestCreateKeepsChildRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sub := uuid.New()
	f.exec(`INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'https://hooks.example.com/', '\x00', 'k')`, sub, f.account)
	for i := range 3 {
		at := monday.Add(time.Duration(i) * time.Hour)
		delivery := v7(at)
		f.exec(`INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body)
			VALUES ($1, $2, $3, $4, 'health_score_changed', '\x00')`, delivery, f.account, sub, uuid.New())
		for range 2 {
			f.exec(`INSERT INTO webhook_delivery_attempts (id, delivery_id, started_at) VALUES ($1, $2, $3)`, uuid.New(), delivery, at)
		}
	}
	require.Equal(t, 6, f.count(`SELECT count(*) FROM webhook_delivery_attempts_default`))

	rep := f.maintain(monday, spec(t, "webhook_delivery_attempts"), spec(t, "webhook_deliveries"))
	require.Contains(t, rep.Created, "webhook_deliveries_p20260105")
	require.Equal(t, 3, f.count(`SELECT count(*) FROM webhook_deliveries_p20260105`), "the deliveries moved into their week")
	require.Equal(t, 6, f.count(`SELECT count(*) FROM webhook_delivery_attempts_p20260105`), "every attempt kept, in its week")
	require.Zero(t, f.count(`SELECT count(*) FROM webhook_delivery_attempts_default`))
}

// TestMaintainAnalyzesParents: autovacuum never analyzes a partitioned
// table itself, so Maintain does: when its statistics are missing or older
// than AnalyzeAfter, and after a run that changed its partitions; a run
// that changed nothing leaves fresh statistics alone.
func TestMaintainAnalyzesParents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	me := spec(t, "message_events")
	lastAnalyze := func() *time.Time {
		var at *time.Time
		require.NoError(t, f.pool.QueryRow(context.Background(),
			"SELECT last_analyze FROM pg_stat_user_tables WHERE relid = 'message_events'::regclass").Scan(&at))
		return at
	}
	require.Nil(t, lastAnalyze())

	rep := f.maintain(monday, me)
	require.Equal(t, []string{"message_events"}, rep.Analyzed)
	require.NotNil(t, lastAnalyze())
	require.Empty(t, f.maintain(monday, me).Analyzed, "fresh, and nothing changed")

	rep = f.maintain(monday.AddDate(0, 0, 7), me)
	require.NotEmpty(t, rep.Created)
	require.Equal(t, []string{"message_events"}, rep.Analyzed, "a new partition")

	f.exec("SELECT pg_stat_reset_single_table_counters('message_events'::regclass)")
	require.Nil(t, lastAnalyze())
	require.Equal(t, []string{"message_events"}, f.maintain(monday.AddDate(0, 0, 7), me).Analyzed, "statistics missing")
}

// A writer that updated an account and then inserts its event while a
// partition of events is being created must not deadlock with it: the
// creation takes the tables events references (accounts) before events,
// in the writers' order, so it waits for the writer instead of holding
// events while it waits for accounts.
func TestCreateWaitsForAWriterOfAReferencedTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.maintain(monday)
	ctx := context.Background()
	writer, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, `UPDATE accounts SET updated_at = now() WHERE id = $1`, f.account)
	require.NoError(t, err)
	var writerPID int
	require.NoError(t, writer.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&writerPID))

	// The next week's partitions, made while the writer holds its account.
	done := make(chan error, 1)
	go func() {
		_, err := partitions.MaintainSpecs(ctx, f.pool, monday.AddDate(0, 0, 7), settings, []partitions.Spec{spec(t, "events")})
		done <- err
	}()
	// Wait until the maintenance waits for a lock the writer holds.
	deadline := time.Now().Add(30 * time.Second)
	for f.count(`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND a.datname = current_database() AND a.pid <> $1`, writerPID) == 0 {
		require.True(t, time.Now().Before(deadline), "the maintenance never waited for the writer")
		time.Sleep(10 * time.Millisecond)
	}
	// The writer goes on: its event insert does not wait for the maintenance.
	_, err = writer.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
		VALUES ($1, $2, 'password_changed', 'info', '{}', '{}', $3)`, uuid.Must(uuid.NewV7()), f.account, monday)
	require.NoError(t, err, "the writer deadlocked with the partition maintenance")
	require.NoError(t, writer.Commit(ctx))
	require.NoError(t, <-done)
	require.True(t, f.exists("events_p20260126"))
}
