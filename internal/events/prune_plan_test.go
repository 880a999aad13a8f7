package events_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

// TestPrunePerPlan: the prune job keeps each account's events for its
// plan's retention (free 7, pro 30, business 90 days), capped by
// EVENT_RETENTION_DAYS; unacknowledged alerts stay whatever the plan.
func TestPrunePerPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	em := newEmitter(t)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	free, pro, business := testfactory.Account(t, pool), testfactory.Account(t, pool), testfactory.Account(t, pool)
	for acct, plan := range map[uuid.UUID]string{pro: "pro", business: "business"} {
		_, err := pool.Exec(ctx, "INSERT INTO account_plans (account_id, plan) VALUES ($1, $2)", acct, plan)
		require.NoError(t, err)
	}
	emit := func(acct uuid.UUID, daysAgo int, sev events.Severity) uuid.UUID {
		return emitAged(t, pool, em, acct, now.AddDate(0, 0, -daysAgo), sev)
	}
	exists := func(id uuid.UUID) bool { return eventExists(t, pool, id) }
	free6, free8, freeAlert := emit(free, 6, events.SeverityInfo), emit(free, 8, events.SeverityInfo), emit(free, 40, events.SeverityCritical)
	pro29, pro31 := emit(pro, 29, events.SeverityInfo), emit(pro, 31, events.SeverityInfo)
	biz31, biz50, biz61 := emit(business, 31, events.SeverityInfo), emit(business, 50, events.SeverityInfo), emit(business, 61, events.SeverityInfo)

	w := jobs.NewEventPruneWorker(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return now },
		Settings: jobs.Settings{EventRetentionDays: 60}, // caps business's 90
	})
	require.NoError(t, w.Work(ctx, nil))
	require.True(t, exists(free6))
	require.False(t, exists(free8), "free keeps 7 days")
	require.True(t, exists(freeAlert), "an unacknowledged alert is kept")
	require.True(t, exists(pro29))
	require.False(t, exists(pro31), "pro keeps 30 days")
	require.True(t, exists(biz31))
	require.True(t, exists(biz50))
	require.False(t, exists(biz61), "EVENT_RETENTION_DAYS=60 caps business's 90 days")
}

// TestPruneDefaultPlan: an account without a plan of its own keeps events
// for the default plan's retention (DEFAULT_PLAN=unlimited: the server's
// whole EVENT_RETENTION_DAYS), while an account an operator put on free
// keeps its 7 days.
func TestPruneDefaultPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	em := newEmitter(t)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	onDefault, onFree := testfactory.Account(t, pool), testfactory.Account(t, pool)
	_, err := pool.Exec(ctx, "INSERT INTO account_plans (account_id, plan) VALUES ($1, 'free')", onFree)
	require.NoError(t, err)
	emit := func(acct uuid.UUID, daysAgo int) uuid.UUID {
		return emitAged(t, pool, em, acct, now.AddDate(0, 0, -daysAgo), events.SeverityInfo)
	}
	exists := func(id uuid.UUID) bool { return eventExists(t, pool, id) }
	default8, default61, free8 := emit(onDefault, 8), emit(onDefault, 61), emit(onFree, 8)
	w := jobs.NewEventPruneWorker(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return now },
		Settings: jobs.Settings{EventRetentionDays: 60, DefaultPlan: "unlimited"},
	})
	require.NoError(t, w.Work(ctx, nil))
	require.True(t, exists(default8), "the default plan (unlimited) keeps what the server keeps")
	require.False(t, exists(default61), "EVENT_RETENTION_DAYS still bounds it")
	require.False(t, exists(free8), "an account placed on free keeps 7 days")
}

// emitAged commits one health_score_changed event of the account raised at.
func emitAged(t *testing.T, pool *pgxpool.Pool, em *events.Emitter, acct uuid.UUID, at time.Time, sev events.Severity) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rise := json.RawMessage(`{"domain":"example.com","previous_score":70,"score":80,"delta":10}`)
	row, err := em.Emit(ctx, tx, events.Event{AccountID: acct, Type: events.TypeHealthScoreChanged, Payload: rise, Severity: sev, At: at})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	return row.ID
}

func eventExists(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)", id).Scan(&ok))
	return ok
}
