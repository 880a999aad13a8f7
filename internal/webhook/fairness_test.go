package webhook

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestGate(t *testing.T) {
	t.Parallel()

	t.Run("AccountBound", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Limits{PerAccount: 2, PerHost: 10})
		a, b := uuid.New(), uuid.New()
		r1, err := g.Admit(a, "https://one.example/hook")
		require.NoError(t, err)
		_, err = g.Admit(a, "https://two.example/hook")
		require.NoError(t, err)
		require.Error(t, g.AccountBusy(a))
		_, err = g.Admit(a, "https://three.example/hook")
		var busy *BusyError
		require.ErrorAs(t, err, &busy)
		require.Equal(t, ScopeAccount, busy.Scope)
		require.Equal(t, 2, busy.Limit)
		require.Contains(t, err.Error(), "WEBHOOK_ACCOUNT_CONCURRENCY")
		// Another account is not held back.
		require.NoError(t, g.AccountBusy(b))
		_, err = g.Admit(b, "https://one.example/hook")
		require.NoError(t, err)
		// Releasing (twice is harmless) makes room for one more.
		r1()
		r1()
		n, _ := g.InFlight(a, "https://one.example/")
		require.Equal(t, 1, n)
		_, err = g.Admit(a, "https://three.example/hook")
		require.NoError(t, err)
	})

	t.Run("HostBound", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Limits{PerAccount: 10, PerHost: 2})
		_, err := g.Admit(uuid.New(), "https://Slow.Example:8443/a")
		require.NoError(t, err)
		_, err = g.Admit(uuid.New(), "https://slow.example./b?x=1")
		require.NoError(t, err)
		// One host whatever the port, case or final dot.
		_, err = g.Admit(uuid.New(), "http://slow.example:9000/c")
		var busy *BusyError
		require.ErrorAs(t, err, &busy)
		require.Equal(t, ScopeHost, busy.Scope)
		require.Equal(t, "slow.example", busy.Host)
		require.Contains(t, err.Error(), "WEBHOOK_HOST_CONCURRENCY")
		_, err = g.Admit(uuid.New(), "https://fast.example/a")
		require.NoError(t, err)
	})

	t.Run("RefusedAdmitCountsNothing", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Limits{PerAccount: 5, PerHost: 1})
		a := uuid.New()
		_, err := g.Admit(a, "https://slow.example/")
		require.NoError(t, err)
		_, err = g.Admit(a, "https://slow.example/")
		require.Error(t, err)
		n, h := g.InFlight(a, "https://slow.example/")
		require.Equal(t, 1, n)
		require.Equal(t, 1, h)
	})

	t.Run("MemoryFollowsPushesInFlight", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Limits{PerAccount: 3, PerHost: 3})
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				release, err := g.Admit(uuid.New(), "https://h"+string(rune('a'+i%26))+".example/")
				if err == nil {
					release()
				}
			}()
		}
		wg.Wait()
		require.Empty(t, g.accounts)
		require.Empty(t, g.hosts)
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, Limits{PerAccount: DefaultAccountConcurrency, PerHost: DefaultHostConcurrency}, NewGate(Limits{}).Limits())
	})
}

func TestHost(t *testing.T) {
	t.Parallel()
	require.Equal(t, "hooks.example.com", Host("https://user:pw@Hooks.Example.COM:8443/p?q=1"))
	require.Equal(t, "::1", Host("http://[::1]:8080/"))
	require.Equal(t, "127.0.0.1", Host("http://127.0.0.1:1/"))
	require.Equal(t, "not a url\x7f", Host("not a url\x7f"))
}

type fixedSource float64

func (f fixedSource) Float64() float64 { return float64(f) }

func TestFairWait(t *testing.T) {
	t.Parallel()
	mid := fixedSource(0.5) // no jitter
	require.Equal(t, FairWaitBase, FairWait(0, mid))
	require.Equal(t, 2*FairWaitBase, FairWait(1, mid))
	require.Equal(t, 8*FairWaitBase, FairWait(3, mid))
	require.Equal(t, FairWaitMax, FairWait(5, mid))
	require.Equal(t, FairWaitMax, FairWait(1000, mid))
	require.Equal(t, 375*time.Millisecond, FairWait(0, fixedSource(0)))
	require.Equal(t, 12500*time.Millisecond, FairWait(1000, fixedSource(1)))
	for range 100 {
		d := FairWait(2, nil)
		require.GreaterOrEqual(t, d, 1500*time.Millisecond)
		require.LessOrEqual(t, d, 2500*time.Millisecond)
	}
}
