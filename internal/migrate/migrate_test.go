package migrate_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/migrate"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestMigrationsAreOrderedAndNamed(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Regexp(t, `^\d{4}_[a-z0-9_]+$`, m.Version)
		if i > 0 {
			require.Less(t, ms[i-1].Version, m.Version)
			require.NotEqual(t, ms[i-1].Version[:4], m.Version[:4], "two migrations share a number")
		}
		require.NotContains(t, strings.ToUpper(m.SQL), "BEGIN;", "migrations run in our transaction; no BEGIN of their own")
	}
}

func TestUpIsIdempotentAndConcurrencySafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database that already has everything (cloned from the template):
	// running again applies nothing, even from several processes at once.
	pool, _ := dbtest.NewDB(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	results := make([][]string, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrate.Up(ctx, pool, logger)
		}()
	}
	wg.Wait()
	for i := range results {
		require.NoError(t, errs[i])
		require.Empty(t, results[i])
	}
	ms, err := migrate.Migrations()
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM mailwatch_migrations").Scan(&n))
	require.Equal(t, len(ms), n)
}

func TestUpFromEmptyAppliesRiverThenOurs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	// Empty the clone: drop every table, River's included.
	_, err := pool.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
	require.NoError(t, err)

	applied, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	require.True(t, strings.HasPrefix(applied[0], "river:"), applied[0])
	ms, _ := migrate.Migrations()
	require.Equal(t, ms[len(ms)-1].Version, applied[len(applied)-1])

	var exists bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('public.accounts') IS NOT NULL AND to_regclass('public.river_job') IS NOT NULL").Scan(&exists))
	require.True(t, exists)
}
