package dataapi

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestEventDailyCounts reads event_daily_counts (the daily counters,
// schema/0036) through the data API: the caller's days only, even
// with the builder's own account filter removed, and each day bounded at
// UTC midnight.
func TestEventDailyCounts(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	ctx := context.Background()
	alice, bob := seed(t, db, 0), seed(t, db, 0)
	for _, e := range []struct {
		account uuid.UUID
		typ, at string
	}{
		{alice.id, "bounce_spike", "2026-01-01T23:59:59.999999Z"},
		{alice.id, "bounce_spike", "2026-01-01T08:00:00Z"},
		{alice.id, "bounce_spike", "2026-01-02T00:00:00Z"},
		{alice.id, "dmarc_report_received", "2026-01-02T13:30:00Z"},
		{bob.id, "bounce_spike", "2026-01-01T10:00:00Z"},
	} {
		_, err := db.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
			VALUES ($1, $2, $3, 'warning', '{}', '{}', $4)`, uuid.Must(uuid.NewV7()), e.account, e.typ, e.at)
		require.NoError(t, err)
	}
	buggy := &Runner{DB: db, opts: buildOptions{omitAccountFilter: true}}
	res, err := run(t, buggy, alice, "event_daily_counts", "select=day,event_type,severity,events,account_id&order=day,event_type", false, false)
	require.NoError(t, err)
	want := []map[string]any{
		{"day": "2026-01-01", "event_type": "bounce_spike", "severity": "warning", "events": float64(2), "account_id": alice.id.String()},
		{"day": "2026-01-02", "event_type": "bounce_spike", "severity": "warning", "events": float64(1), "account_id": alice.id.String()},
		{"day": "2026-01-02", "event_type": "dmarc_report_received", "severity": "warning", "events": float64(1), "account_id": alice.id.String()},
	}
	require.Equal(t, want, rowsOf(t, res))

	res, err = run(t, &Runner{DB: db}, bob, "event_daily_counts", "day=gte.2026-01-01&select=events", false, false)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{{"events": float64(1)}}, rowsOf(t, res))
}

// TestEventDailyCountsSumSlots reads event_daily_counts over striped daily
// rows (schema/0039_striped_event_counts.sql): a key counted in two slots
// is one row with their sum, and a key whose slots cancel out is not
// listed.
func TestEventDailyCountsSumSlots(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 0)
	seed(t, db, 0)
	_, err := db.Exec(context.Background(), `INSERT INTO event_counts_daily (account_id, day, event_type, severity, slot, events)
		VALUES ($1, '2026-01-02', 'bounce_spike', 'warning', 1, 2), ($1, '2026-01-02', 'bounce_spike', 'warning', 5, 3),
		       ($1, '2026-01-03', 'bounce_spike', 'warning', 1, 4), ($1, '2026-01-03', 'bounce_spike', 'warning', 5, -4)`, alice.id)
	require.NoError(t, err)
	res, err := run(t, &Runner{DB: db, MaxRows: 10}, alice, "event_daily_counts", "select=day,events&day=lt.2026-01-10&order=day",
		false, false)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{{"day": "2026-01-02", "events": float64(5)}}, rowsOf(t, res))
}
