package subscriptions_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestAdmitBounds: max_in_flight leases at most that many slots across
// callers, frees one on release or when its lease expires; max_per_second
// admits one second's burst, then one push per interval, and says when.
func TestAdmitBounds(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	svc := newService(t)
	account := testfactory.Account(t, tx)
	now := time.Now().UTC()
	two, five := int32(2), int32(5)
	row, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook", MaxInFlight: &two}, now)
	require.NoError(t, err)
	require.True(t, subscriptions.Bounded(row))

	admit := func(sub dbsqlc.EventSubscription, at time.Time) (subscriptions.Lease, *subscriptions.Busy) {
		t.Helper()
		l, busy, err := subscriptions.Admit(t.Context(), tx, sub, uuid.New(), at)
		require.NoError(t, err)
		return l, busy
	}
	a, busy := admit(row, now)
	require.Nil(t, busy)
	_, busy = admit(row, now)
	require.Nil(t, busy)
	_, busy = admit(row, now)
	require.NotNil(t, busy, "a third push in flight waits")
	require.True(t, busy.InFlight)
	require.Contains(t, busy.Error(), "max_in_flight")
	require.NoError(t, a.Release(t.Context(), tx))
	require.NoError(t, a.Release(t.Context(), tx), "releasing twice is harmless")
	_, busy = admit(row, now)
	require.Nil(t, busy, "a released slot is free")
	_, busy = admit(row, now)
	require.NotNil(t, busy)
	_, busy = admit(row, now.Add(time.Minute))
	require.Nil(t, busy, "a lease whose worker died expires")

	rated, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook", MaxPerSecond: &five}, now)
	require.NoError(t, err)
	for i := range 5 {
		_, busy = admit(rated, now)
		require.Nil(t, busy, "push %d of the first second's burst", i)
	}
	_, busy = admit(rated, now)
	require.NotNil(t, busy)
	require.False(t, busy.InFlight)
	require.Equal(t, 200*time.Millisecond, busy.Wait.Round(time.Millisecond), "the next share comes one interval on")
	later := now.Add(busy.Wait)
	_, busy = admit(rated, later)
	require.Nil(t, busy)
	_, busy = admit(rated, later)
	require.NotNil(t, busy, "then one per interval")

	for _, bad := range []int32{0, subscriptions.MaxInFlightLimit + 1} {
		_, _, err = svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook", MaxInFlight: &bad}, now)
		var fe *subscriptions.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "max_in_flight", fe.Field)
	}
	var none *int32
	twoP := &two
	updated, err := svc.Update(t.Context(), tx, account, rated.ID, subscriptions.Change{MaxPerSecond: &none, MaxInFlight: &twoP})
	require.NoError(t, err)
	require.Nil(t, updated.MaxPerSecond)
	require.Equal(t, two, *updated.MaxInFlight)
}
