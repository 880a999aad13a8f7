package usage_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/usage"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestFlushWritesCountsAndLastUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	account, key := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err := tx.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, account.String()+"@example.com")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO api_keys (id, account_id, label, key_identifier, key_hash) VALUES ($1, $2, 'k', 'mw_abcd', $3)", key, account, key[:])
	require.NoError(t, err)

	tr := usage.NewTracker()
	day1 := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	for i := 0; i < 5; i++ {
		tr.Record(key, day1)
	}
	tr.Record(key, day2)
	tr.Record(uuid.New(), day2) // a key that no longer exists is skipped
	require.NoError(t, tr.Flush(ctx, tx))

	rows, err := tx.Query(ctx, "SELECT day::text, requests FROM api_usage_daily WHERE api_key_id = $1 ORDER BY day", key)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var day string
		var n int64
		require.NoError(t, rows.Scan(&day, &n))
		got = append(got, day+"="+strconv.FormatInt(n, 10))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"2026-03-01=5", "2026-03-02=1"}, got)

	var last time.Time
	require.NoError(t, tx.QueryRow(ctx, "SELECT last_used_at FROM api_keys WHERE id = $1", key).Scan(&last))
	require.True(t, last.Equal(day2), last)

	// A second flush adds to the same rows; nothing recorded, nothing written.
	tr.Record(key, day2)
	require.NoError(t, tr.Flush(ctx, tx))
	require.NoError(t, tr.Flush(ctx, tx))
	var n int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT requests FROM api_usage_daily WHERE api_key_id = $1 AND day = '2026-03-02'", key).Scan(&n))
	require.EqualValues(t, 2, n)
}

func TestFlushFailureKeepsCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	tr := usage.NewTracker()
	key := uuid.New()
	tr.Record(key, time.Now())

	broken, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, tr.Flush(broken, pool))

	// The counts survived the failed flush: once the key exists they land.
	account := uuid.New()
	_, err := pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'f@example.com', 'x')", account)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO api_keys (id, account_id, label, key_identifier, key_hash) VALUES ($1, $2, 'k', 'mw_abcd', $3)", key, account, key[:])
	require.NoError(t, err)
	require.NoError(t, tr.Flush(ctx, pool))
	var n int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT sum(requests) FROM api_usage_daily WHERE api_key_id = $1", key).Scan(&n))
	require.EqualValues(t, 1, n)
}
