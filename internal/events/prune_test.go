package events_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	em := newEmitter(t)
	account := testfactory.Account(t, pool)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	old := now.AddDate(0, 0, -91)
	recent := now.AddDate(0, 0, -89)
	ex, _ := events.Lookup(events.TypeHealthScoreChanged)

	emit := func(at time.Time, sev events.Severity) uuid.UUID {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		// A rise: its escalation rule gives info, so sev is what counts.
		rise := json.RawMessage(`{"domain":"example.com","previous_score":70,"score":80,"delta":10}`)
		row, err := em.Emit(ctx, tx, events.Event{AccountID: account, Type: ex.Name, Payload: rise, Severity: sev, At: at})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return row.ID
	}
	ack := func(id uuid.UUID) {
		_, err := pool.Exec(ctx, "UPDATE events SET acknowledged_at = $2, acknowledged_by = 'ops' WHERE id = $1", id, old)
		require.NoError(t, err)
	}

	var oldInfo []uuid.UUID
	for i := 0; i < 23; i++ { // more than a few batches of 5
		oldInfo = append(oldInfo, emit(old.Add(-time.Duration(i)*time.Hour), events.SeverityInfo))
	}
	oldWarning := emit(old, events.SeverityWarning)
	oldUnacked := emit(old, events.SeverityCritical)
	oldAcked := emit(old, events.SeverityCritical)
	ack(oldAcked)
	recentInfo := emit(recent, events.SeverityInfo)
	recentAcked := emit(recent, events.SeverityCritical)
	ack(recentAcked)

	exists := func(id uuid.UUID) bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)", id).Scan(&ok))
		return ok
	}

	t.Run("PruneInBatches", func(t *testing.T) {
		n, err := events.Prune(ctx, pool, now.AddDate(0, 0, -90), 5)
		require.NoError(t, err)
		require.Equal(t, int64(len(oldInfo)+2), n)
		for _, id := range oldInfo {
			require.False(t, exists(id))
		}
		require.False(t, exists(oldWarning))
		require.False(t, exists(oldAcked), "an acknowledged old alert is deleted")
		require.True(t, exists(oldUnacked), "an unacknowledged alert is kept however old")
		require.True(t, exists(recentInfo))
		require.True(t, exists(recentAcked))

		n, err = events.Prune(ctx, pool, now.AddDate(0, 0, -90), 5)
		require.NoError(t, err)
		require.Zero(t, n, "a second run has nothing left to do")
	})

	t.Run("WorkerUsesEventRetentionDays", func(t *testing.T) {
		w := jobs.NewEventPruneWorker(jobs.Deps{
			Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:      func() time.Time { return now },
			Settings: jobs.Settings{EventRetentionDays: 30},
		})
		require.NoError(t, w.Work(ctx, nil))
		require.False(t, exists(recentInfo), "89 days old is past a 30-day retention")
		require.False(t, exists(recentAcked))
		require.True(t, exists(oldUnacked))
	})
}
