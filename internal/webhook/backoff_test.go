package webhook

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestBaseDelay(t *testing.T) {
	t.Parallel()

	want := []time.Duration{
		5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
	}
	var total time.Duration
	for i, w := range want {
		require.Equal(t, w, BaseDelay(i+1), "after attempt %d", i+1)
		total += w
	}
	require.Equal(t, 75*time.Hour+35*time.Minute+5*time.Second, total)
	require.Len(t, want, MaxAttempts-1, "one delay between each pair of attempts")

	require.Equal(t, 5*time.Second, BaseDelay(0))
	require.Equal(t, 5*time.Second, BaseDelay(-3))
	require.Equal(t, 24*time.Hour, BaseDelay(10))
	require.Equal(t, 24*time.Hour, BaseDelay(100))
}

func TestNextDelay(t *testing.T) {
	t.Parallel()

	require.Equal(t, 4500*time.Millisecond, NextDelay(1, fixedRand(0)))
	require.Equal(t, 5*time.Second, NextDelay(1, fixedRand(0.5)))
	require.Equal(t, 5500*time.Millisecond, NextDelay(1, fixedRand(0.99999)), "rounded to the millisecond, never above +10%")
	require.Equal(t, 108*time.Minute, NextDelay(4, fixedRand(0)))
	require.Equal(t, 24*time.Hour, NextDelay(9, fixedRand(0.5)))

	rnd := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 12; n++ {
		base := BaseDelay(n)
		for range 200 {
			d := NextDelay(n, rnd)
			require.GreaterOrEqual(t, d, base*9/10)
			require.LessOrEqual(t, d, base*11/10)
		}
		// The shared source works too (nil).
		d := NextDelay(n, nil)
		require.GreaterOrEqual(t, d, base*9/10)
		require.LessOrEqual(t, d, base*11/10)
	}
}
