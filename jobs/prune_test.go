package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestPruneUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	account := uuid.New()
	live, revokedOld, revokedWithUsage := uuid.New(), uuid.New(), uuid.New()
	_, err := tx.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'prune@example.com', 'x')", account)
	require.NoError(t, err)
	for _, k := range []struct {
		id      uuid.UUID
		revoked any
	}{{live, nil}, {revokedOld, "2020-01-01"}, {revokedWithUsage, "2020-01-01"}} {
		_, err := tx.Exec(ctx, "INSERT INTO api_keys (id, account_id, label, key_identifier, key_hash, revoked_at) VALUES ($1, $2, $3, 'mw_abcd', $4, $5::timestamptz)",
			k.id, account, k.id.String(), k.id[:], k.revoked)
		require.NoError(t, err)
	}
	cutoff := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, row := range []struct {
		key uuid.UUID
		day string
	}{{live, "2024-12-31"}, {live, "2025-01-01"}, {revokedWithUsage, "2025-06-01"}} {
		_, err := tx.Exec(ctx, "INSERT INTO api_usage_daily (account_id, api_key_id, day, requests) VALUES ($1, $2, $3, 1)", account, row.key, row.day)
		require.NoError(t, err)
	}

	n, err := pruneUsage(ctx, tx, cutoff)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "one usage row and one revoked key")

	var days []string
	rows, err := tx.Query(ctx, "SELECT day::text FROM api_usage_daily ORDER BY day")
	require.NoError(t, err)
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		days = append(days, d)
	}
	require.Equal(t, []string{"2025-01-01", "2025-06-01"}, days, "the cutoff day itself is kept")

	var keys int
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM api_keys WHERE account_id = $1", account).Scan(&keys))
	require.Equal(t, 2, keys, "the revoked key still referenced by usage is kept")
}
