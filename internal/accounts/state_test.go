package accounts

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestIssuedBeforeCredentialsChange(t *testing.T) {
	t.Parallel()
	changed := time.Date(2026, 3, 1, 12, 0, 0, 400_000_000, time.UTC)
	st := State{CredentialsChangedAt: &changed}
	for _, tc := range []struct {
		name    string
		iat     time.Time
		refused bool
	}{
		{"SecondBefore", changed.Add(-time.Second).Truncate(time.Second), true},
		// iat has whole seconds: a token of the change's second may predate it.
		{"SameSecond", changed.Truncate(time.Second), true},
		{"NextSecond", changed.Truncate(time.Second).Add(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.refused, st.IssuedBeforeCredentialsChange(tc.iat))
		})
	}
	require.False(t, State{}.IssuedBeforeCredentialsChange(time.Time{}), "never changed: nothing refused")

	// WaitPastChange ends at the next second, so a token signed then passes.
	now := time.Now()
	recent := State{CredentialsChangedAt: &now}
	require.NoError(t, WaitPastChange(context.Background(), recent, time.Now()))
	require.False(t, recent.IssuedBeforeCredentialsChange(time.Now().Truncate(time.Second)))
}

func TestSuspendedDetail(t *testing.T) {
	t.Parallel()
	now := time.Now()
	require.Contains(t, State{SuspendedAt: &now, SuspendedReason: "abuse"}.SuspendedDetail(), "suspended: abuse")
	require.True(t, State{SuspendedAt: &now}.Suspended())
	require.True(t, State{DeletedAt: &now}.Deleting())
}

// TestCacheTTLAndEvict: a cached state is served until CacheTTL, or until
// evicted; a missing account is cached as missing.
func TestCacheTTLAndEvict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	id := uuid.Must(uuid.NewV7())
	_, err := tx.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", id, id.String()+"@example.com")
	require.NoError(t, err)
	now := time.Now()
	c := NewCache(func() time.Time { return now })

	st, err := c.Get(ctx, tx, id)
	require.NoError(t, err)
	require.False(t, st.Suspended())
	_, err = tx.Exec(ctx, "UPDATE accounts SET suspended_at = now(), suspended_reason = 'r' WHERE id = $1", id)
	require.NoError(t, err)
	st, err = c.Get(ctx, tx, id)
	require.NoError(t, err)
	require.False(t, st.Suspended(), "served from the cache within the TTL")
	now = now.Add(CacheTTL)
	st, err = c.Get(ctx, tx, id)
	require.NoError(t, err)
	require.True(t, st.Suspended(), "read again after the TTL")
	require.Equal(t, "r", st.SuspendedReason)

	_, err = tx.Exec(ctx, "UPDATE accounts SET suspended_at = NULL WHERE id = $1", id)
	require.NoError(t, err)
	c.Evict(id)
	st, err = c.Get(ctx, tx, id)
	require.NoError(t, err)
	require.False(t, st.Suspended(), "read again after an eviction")

	_, err = c.Get(ctx, tx, uuid.New())
	require.ErrorIs(t, err, ErrNotFound)
}

func TestDeleteOrderChildrenFirst(t *testing.T) {
	t.Parallel()
	fks := []fk{
		{child: "deliveries", parent: "events"}, {child: "deliveries", parent: "subscriptions"},
		{child: "attempts", parent: "deliveries"}, {child: "events", parent: "accounts"},
		{child: "subscriptions", parent: "accounts"}, {child: "tree", parent: "tree"},
	}
	order := deleteOrder([]string{"accounts", "attempts", "deliveries", "events", "subscriptions", "tree"}, fks)
	pos := map[string]int{}
	for i, tbl := range order {
		pos[tbl] = i
	}
	require.Len(t, order, 6)
	for _, f := range fks {
		if f.child != f.parent {
			require.Less(t, pos[f.child], pos[f.parent], "%s before %s in %v", f.child, f.parent, order)
		}
	}
}
