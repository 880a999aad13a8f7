package providers_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/providers"
)

// The gate admits up to its bound of one account's jobs, refuses the next
// without counting it, leaves other accounts alone, and frees a slot on
// release (a second release changes nothing).
func TestGateBoundsEachAccount(t *testing.T) {
	t.Parallel()
	g := providers.NewGate(2)
	a, b := uuid.New(), uuid.New()
	r1, err := g.Admit(a)
	require.NoError(t, err)
	r2, err := g.Admit(a)
	require.NoError(t, err)
	_, err = g.Admit(a)
	var busy *providers.BusyError
	require.True(t, errors.As(err, &busy), "a third job of a is over the bound: %v", err)
	require.Equal(t, 2, busy.Limit)
	require.Equal(t, 2, g.Running(a), "a refused job is not counted")

	rb, err := g.Admit(b)
	require.NoError(t, err, "another account is not held by a's bound")

	r1()
	r1()
	require.Equal(t, 1, g.Running(a), "releasing twice frees one slot")
	r3, err := g.Admit(a)
	require.NoError(t, err)
	r2()
	r3()
	rb()
	require.Zero(t, g.Running(a))
	require.Zero(t, g.Running(b))
}

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
