package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestMessageEventRetention runs the two retention jobs over message
// events: the prune job deletes a plan's rows past its shorter retention
// and the DEFAULT partition's expired rows, never the rows of a partition
// the maintenance job will drop (a trigger records every row deleted one
// by one); the maintenance job then drops the expired weeks whole, and
// the daily rollups still equal a recount of the rows left.
func TestMessageEventRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	free, business := testfactory.Account(t, pool), testfactory.Account(t, pool)
	exec(`INSERT INTO account_plans (account_id, plan) VALUES ($1, 'business')`, business)
	providerOf := map[uuid.UUID]uuid.UUID{free: uuid.New(), business: uuid.New()}
	for acct, prov := range providerOf {
		exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
			VALUES ($1, $2, 'sendgrid', 'sg', '\x00', 'k')`, prov, acct)
	}
	now := time.Date(2026, 6, 3, 12, 0, 0, 0, time.UTC) // a Wednesday
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	maintain := func(at time.Time, days int) {
		t.Helper()
		w := NewPartitionMaintainWorker(Deps{Pool: pool, Logger: logger, Now: func() time.Time { return at },
			Settings: Settings{EventRetentionDays: days}})
		require.NoError(t, w.Work(ctx, &river.Job[partitions.MaintainArgs]{}))
	}
	// The weeks from ten weeks back were made as time went by.
	for at := now.AddDate(0, 0, -70); !at.After(now); at = at.AddDate(0, 0, 7) {
		maintain(at, 90)
	}
	// The events are stored on two connections of different rollup slots
	// (the backend pid modulo 8): the rollups count them in both.
	writers, stored := dbtest.SlotConns(t, pool, 2), 0
	event := func(acct uuid.UUID, at time.Time) string {
		id := uuid.NewString()
		stored++
		_, err := writers[stored%2].Exec(ctx, `INSERT INTO message_events (id, account_id, provider_id, provider_kind,
			event_id, event_type, recipient, recipient_hash, occurred_at)
			VALUES ($1::uuid, $2, $3, 'sendgrid', $1::text, 'delivered', 'a@example.com', '\x00', $4)`, id, acct, providerOf[acct], at)
		require.NoError(t, err)
		return id
	}
	exec(`CREATE TABLE deletions (event_id text)`)
	exec(`CREATE FUNCTION record_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO deletions VALUES (OLD.event_id); RETURN OLD; END $$`)
	exec(`CREATE TRIGGER record_delete BEFORE DELETE ON message_events FOR EACH ROW EXECUTE FUNCTION record_deletion()`)
	day := 24 * time.Hour
	free6, free9 := event(free, now.Add(-6*day)), event(free, now.Add(-9*day))
	biz9, biz40, biz60 := event(business, now.Add(-9*day)), event(business, now.Add(-40*day)), event(business, now.Add(-60*day))
	bizUndated := event(business, time.Unix(0, 0)) // a payload without a timestamp: DEFAULT partition
	deleted := func() []string {
		rows, err := pool.Query(ctx, `SELECT event_id FROM deletions`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	left := func() []string {
		rows, err := pool.Query(ctx, `SELECT event_id FROM message_events`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}

	// EVENT_RETENTION_DAYS=30: the free plan keeps message events for the
	// spike checks' week and an hour; the fleet for 30 days.
	prune := NewEventPruneWorker(Deps{Pool: pool, Logger: logger, Now: func() time.Time { return now },
		Settings: Settings{EventRetentionDays: 30}})
	require.NoError(t, prune.Work(ctx, &river.Job[events.PruneArgs]{}))
	require.ElementsMatch(t, []string{free9, bizUndated}, deleted(),
		"one by one: the free plan's rows past its retention and the DEFAULT partition's expired row, nothing else")
	require.ElementsMatch(t, []string{free6, biz9, biz40, biz60}, left())

	maintain(now, 30)
	require.ElementsMatch(t, []string{free9, bizUndated}, deleted(), "the maintenance job deletes no row")
	require.ElementsMatch(t, []string{free6, biz9}, left(), "the weeks past 30 days were dropped with their rows")

	// The drop deleted the dropped weeks' rollup hours, and their days went
	// with them (the daily rollups follow the hourly rows).
	for _, sql := range []string{messageDomainDailyDiffer, messageAccountDailyDiffer} {
		var differ int
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&differ))
		require.Zero(t, differ, sql)
	}
	var days int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM message_event_account_daily
		GROUP BY account_id, day, provider_kind, event_type, bounce_class HAVING sum(n) <> 0) k`).Scan(&days))
	require.Equal(t, 2, days, "the days of the two events kept")
}

// messageDomainDailyDiffer and messageAccountDailyDiffer count the keys of
// the daily message-event rollups whose sums over slots differ from a
// recount of the raw rows.
const (
	messageDomainDailyDiffer = `WITH rollup AS (
		SELECT account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n)::bigint
		FROM message_event_domain_daily GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING sum(n) <> 0)
		SELECT count(*) FROM (
		(SELECT account_id, (occurred_at AT TIME ZONE 'UTC')::date, domain, domain_id, provider_id, provider_kind,
		        event_type, bounce_class, count(*) FROM message_events GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
		 EXCEPT ALL SELECT * FROM rollup)
		UNION ALL
		(SELECT * FROM rollup
		 EXCEPT ALL SELECT account_id, (occurred_at AT TIME ZONE 'UTC')::date, domain, domain_id, provider_id,
		        provider_kind, event_type, bounce_class, count(*) FROM message_events GROUP BY 1, 2, 3, 4, 5, 6, 7, 8)) d`
	messageAccountDailyDiffer = `WITH rollup AS (
		SELECT account_id, day, provider_kind, event_type, bounce_class, sum(n)::bigint
		FROM message_event_account_daily GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0)
		SELECT count(*) FROM (
		(SELECT account_id, (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, count(*)
		 FROM message_events GROUP BY 1, 2, 3, 4, 5
		 EXCEPT ALL SELECT * FROM rollup)
		UNION ALL
		(SELECT * FROM rollup
		 EXCEPT ALL SELECT account_id, (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class,
		        count(*) FROM message_events GROUP BY 1, 2, 3, 4, 5)) d`
)
