package dbutil_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// TestBoundedCutsEveryKindOfStatement: a statement that outlives the bound
// fails with a StatementTimeoutError whatever the call (Exec, Query while
// iterating, QueryRow, SendBatch, a transaction's statements), though the
// caller's context lives on; fast statements and the pool are unaffected;
// the caller's own cancellation is not reported as the bound.
func TestBoundedCutsEveryKindOfStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	b := dbutil.Bounded(pool, 300*time.Millisecond)
	const slow = "SELECT pg_sleep(30)"

	requireCut := func(what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		require.True(t, dbutil.IsStatementTimeout(err), "%s: %v", what, err)
		require.Contains(t, err.Error(), "the database did not answer within 300ms", what)
	}
	_, err := b.Exec(ctx, slow)
	requireCut("Exec", err)

	var one int
	requireCut("QueryRow", b.QueryRow(ctx, slow).Scan(&one))

	rows, err := b.Query(ctx, "SELECT x, pg_sleep(CASE WHEN x = 3 THEN 30 ELSE 0 END) FROM generate_series(1, 3) x")
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	requireCut("Query", err)

	batch := &pgx.Batch{}
	batch.Queue("SELECT 1")
	batch.Queue(slow)
	requireCut("SendBatch", b.SendBatch(ctx, batch).Close())

	tx, err := b.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, slow)
	requireCut("a transaction's Exec", err)
	_ = tx.Rollback(ctx)

	// Fast statements pass, and the pool replaced the cut connections.
	for range 10 {
		require.NoError(t, b.QueryRow(ctx, "SELECT 1").Scan(&one))
	}
	rows, err = b.Query(ctx, "SELECT generate_series(1, 1000)")
	require.NoError(t, err)
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	require.Len(t, ns, 1000)
	tx, err = b.Begin(ctx)
	require.NoError(t, err)
	sp, err := tx.Begin(ctx) // a savepoint, bounded as well
	require.NoError(t, err)
	_, err = sp.Exec(ctx, slow)
	requireCut("a savepoint's Exec", err)
	_ = tx.Rollback(ctx)

	// The caller's own end is its own error, not the bound's.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = dbutil.Bounded(pool, time.Minute).Exec(cctx, slow)
	require.Error(t, err)
	require.False(t, dbutil.IsStatementTimeout(err), "%v", err)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)

	require.Same(t, pool, dbutil.Bounded(pool, 0), "no bound: the executor itself")
}

// TestPoolStatementTimeoutIsTheServers: PoolOptions.StatementTimeout makes
// Postgres cancel a slow statement itself (57014) and keep the connection.
func TestPoolStatementTimeoutIsTheServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewDB(t)
	pool, err := dbutil.NewPoolWith(ctx, url, dbutil.PoolOptions{MaxConns: 1, StatementTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var pid1, pid2 int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1))
	_, err = pool.Exec(ctx, "SELECT pg_sleep(30)")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "57014", pgErr.Code)
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid2))
	require.Equal(t, pid1, pid2, "the connection survived the cancellation")
	var setting string
	require.NoError(t, pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&setting))
	require.Equal(t, "200ms", setting)
}

// TestPoolTurnsJITOff: pools compile no plan to machine code (the
// compilation costs more than mailwatch's short statements), unless the
// URL asks for it.
func TestPoolTurnsJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewDB(t)
	for _, c := range []struct{ url, want string }{
		{url, "off"},
		{withParam(url, "jit=on"), "on"},
	} {
		pool, err := dbutil.NewPool(ctx, c.url, 1)
		require.NoError(t, err)
		var jit string
		require.NoError(t, pool.QueryRow(ctx, "SHOW jit").Scan(&jit))
		pool.Close()
		require.Equal(t, c.want, jit, c.url)
	}
}

// withParam adds a query parameter to a Postgres URL.
func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}
