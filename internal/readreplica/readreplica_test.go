package readreplica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseLSN(t *testing.T) {
	v, err := parseLSN("16/B374D848")
	require.NoError(t, err)
	require.Equal(t, pgLSN(0x16_B374D848), v)
	a, _ := parseLSN("0/FFFFFFFF")
	b, _ := parseLSN("1/0")
	require.Less(t, a, b, "the high half orders first")
	for _, bad := range []string{"", "16", "x/1", "1/x", "1/100000000"} {
		_, err := parseLSN(bad)
		require.Error(t, err, bad)
	}
}

// TestObserveBoundsStaleness: the bound is the age of the newest primary
// position the replica has replayed, and unknown once it is behind every
// position kept.
func TestObserveBoundsStaleness(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := New(nil, nil, Options{MaxLag: 5 * time.Second, Interval: time.Second, Now: func() time.Time { return clock }})
	tick := func() { clock = clock.Add(time.Second) }

	lag, ok := r.observe(clock, 100, 100)
	require.True(t, ok)
	require.Zero(t, lag, "caught up with the sample just taken")

	tick()
	lag, ok = r.observe(clock, 200, 100) // replica still at 100
	require.True(t, ok)
	require.Equal(t, time.Second, lag, "it holds what the primary had a second ago")

	for range 3 {
		tick()
		_, _ = r.observe(clock, 300, 100)
	}
	lag, ok = r.observe(clock, 300, 100)
	require.True(t, ok)
	require.Equal(t, 4*time.Second, lag)

	for range 5 {
		tick()
		_, ok = r.observe(clock, 400, 100)
	}
	require.False(t, ok, "behind every position of the last MaxLag plus two intervals")

	tick()
	lag, ok = r.observe(clock, 400, 400)
	require.True(t, ok)
	require.Zero(t, lag, "caught up again")
}

func TestNoReplicaReadsPrimary(t *testing.T) {
	r := New(nil, nil, Options{MaxLag: time.Second})
	require.False(t, r.Fresh())
	_, known := r.Lag()
	require.False(t, known)
	require.Nil(t, r.Executor())
}
