package dbutil_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestUUIDRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)

	id := uuid.Must(uuid.NewV7())
	var text string
	var back uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, "SELECT $1::uuid::text, $1::uuid", id).Scan(&text, &back))
	require.Equal(t, id.String(), text)
	require.Equal(t, id, back)

	var ptr *uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, "SELECT NULL::uuid").Scan(&ptr))
	require.Nil(t, ptr)
	require.NoError(t, tx.QueryRow(ctx, "SELECT $1::uuid", &id).Scan(&ptr))
	require.Equal(t, id, *ptr)

	var plain uuid.UUID
	require.ErrorContains(t, tx.QueryRow(ctx, "SELECT NULL::uuid").Scan(&plain), "NULL")
	var text2 string
	require.NoError(t, tx.QueryRow(ctx, "SELECT $1::uuid", id).Scan(&text2), "other targets keep working")
	require.Equal(t, id.String(), text2)

	ids := []uuid.UUID{uuid.New(), uuid.New()}
	var backs []uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, "SELECT $1::uuid[]", ids).Scan(&backs))
	require.Equal(t, ids, backs)
}
