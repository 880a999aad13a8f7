package dbtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestTxIsolatedAndRolledBack(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	tx := Tx(t)
	var n int
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n), "River's tables are migrated")
	_, err := tx.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES (gen_random_uuid(), 'tx@example.com', 'x')")
	require.NoError(t, err)

	other := Tx(t)
	require.NoError(t, other.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE email = 'tx@example.com'").Scan(&n))
	require.Zero(t, n, "uncommitted rows are invisible to other tests")
}

func TestNewDBIsFreshAndMigrated(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	pool, url := NewDB(t)
	require.NotEmpty(t, url)
	_, err := pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES (gen_random_uuid(), 'fresh@example.com', 'x')")
	require.NoError(t, err)

	pool2, _ := NewDB(t)
	var n int
	require.NoError(t, pool2.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, pool2.QueryRow(ctx, "SELECT count(*) FROM mailwatch_migrations").Scan(&n))
	require.Positive(t, n)
}
