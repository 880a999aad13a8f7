package providers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/providers"
)

func TestGateDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, providers.DefaultAccountConcurrency, providers.NewGate(0).Limit())
	require.Equal(t, 1, providers.AccountConcurrency(0))
	require.Equal(t, 1, providers.AccountConcurrency(1))
	require.Equal(t, 2, providers.AccountConcurrency(3))
	require.Equal(t, providers.DefaultAccountConcurrency, providers.AccountConcurrency(100), "WORKER_CONCURRENCY's default")
}

type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

// A job's waits grow from FairWaitBase to FairWaitMax, ±25%.
func TestFairWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, providers.FairWaitBase, providers.FairWait(0, fixedRand(0.5)))
	require.Equal(t, 2*providers.FairWaitBase, providers.FairWait(1, fixedRand(0.5)))
	require.Equal(t, providers.FairWaitMax, providers.FairWait(50, fixedRand(0.5)))
	require.Equal(t, time.Duration(float64(providers.FairWaitBase)*0.75).Round(time.Millisecond), providers.FairWait(0, fixedRand(0)))
	require.Equal(t, time.Duration(float64(providers.FairWaitMax)*1.25), providers.FairWait(50, fixedRand(1)))
	for waits := range 10 {
		d := providers.FairWait(waits, nil)
		require.GreaterOrEqual(t, d, time.Duration(float64(providers.FairWaitBase)*0.75))
		require.LessOrEqual(t, d, time.Duration(float64(providers.FairWaitMax)*1.25))
	}
	require.Zero(t, providers.FairWaits(nil))
	require.Equal(t, 3, providers.FairWaits([]byte(`{"`+providers.MetadataFairWaits+`":3}`)))
}
