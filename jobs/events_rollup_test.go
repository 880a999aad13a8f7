package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestEventRollupRebuildJobs: the rebuild-event-rollups task's job queues
// one rebuild per account, and each corrects that account's hourly and
// daily counters.
func TestEventRollupRebuildJobs(t *testing.T) {
	t.Parallel()
	b := startReportWorkers(t)
	ctx := context.Background()
	at := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	for range 3 {
		account := testfactory.Account(t, b.pool)
		for i := range 5 {
			_, err := b.pool.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
				VALUES ($1, $2, 'bounce_spike', 'warning', '{}', '{}', $3)`, uuid.Must(uuid.NewV7()), account, at.Add(time.Duration(i)*40*time.Minute))
			require.NoError(t, err)
		}
	}
	const differ = `SELECT count(*) FROM (
		(SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4
		 EXCEPT SELECT account_id, hour, event_type, severity, events FROM (SELECT account_id, hour, event_type, severity, sum(events) AS events FROM event_counts_hourly GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c)
		UNION ALL
		(SELECT account_id, hour, event_type, severity, events FROM (SELECT account_id, hour, event_type, severity, sum(events) AS events FROM event_counts_hourly GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c
		 EXCEPT SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4)) d`
	const dailyDiffer = `SELECT count(*) FROM (
		(SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4
		 EXCEPT SELECT account_id, day, event_type, severity, events FROM (SELECT account_id, day, event_type, severity, sum(events) AS events FROM event_counts_daily GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c)
		UNION ALL
		(SELECT account_id, day, event_type, severity, events FROM (SELECT account_id, day, event_type, severity, sum(events) AS events FROM event_counts_daily GROUP BY 1, 2, 3, 4 HAVING sum(events) <> 0) c
		 EXCEPT SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, event_type, severity, count(*) FROM events GROUP BY 1, 2, 3, 4)) d`
	b.waitFor(t, 0, differ)
	b.waitFor(t, 0, dailyDiffer)
	_, err := b.pool.Exec(ctx, "UPDATE event_counts_hourly SET events = events * 2")
	require.NoError(t, err)
	b.waitFor(t, 18, differ)     // 3 counters an account (9:00, 10:00, 11:00), each wrong, counted on both sides
	b.waitFor(t, 6, dailyDiffer) // the daily counters follow their hours: 1 an account, counted on both sides
	_, err = b.pool.Exec(ctx, "UPDATE event_counts_hourly SET events = events / 2")
	require.NoError(t, err)
	b.waitFor(t, 0, dailyDiffer)
	// A drift of the daily counters themselves, and again of the hourly ones.
	_, err = b.pool.Exec(ctx, "UPDATE event_counts_daily SET events = events + 1")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE event_counts_hourly SET events = events * 2")
	require.NoError(t, err)
	b.waitFor(t, 6, dailyDiffer)

	b.run(t, events.RollupRebuildAllArgs{})
	// 3 hourly counters and the daily one an account.
	b.waitFor(t, 3, "SELECT count(*) FROM river_job WHERE kind = 'event_rollup_rebuild' AND state = 'completed' AND (metadata->'output'->>'corrected')::int = 4")
	b.waitFor(t, 0, differ)
	b.waitFor(t, 0, dailyDiffer)
}
