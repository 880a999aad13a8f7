package webhook

import (
	"context"
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
		// Full, and none of its pushes ended yet: busy before any work.
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

	t.Run("WaitsForASlot", func(t *testing.T) {
		t.Parallel()
		g, a, keep, release := fullAccount(t)
		require.NoError(t, g.AccountBusy(a), "full, but its pushes are moving: a push may wait in line")
		got := make(chan error, 1)
		go func() {
			r, err := g.Acquire(context.Background(), a, "https://h.example/", time.Hour)
			if err == nil {
				r()
			}
			got <- err
		}()
		// Once the push waits in line, freeing a slot hands it on.
		require.Eventually(t, func() bool { return g.waiting(a) == 1 }, time.Minute, time.Millisecond)
		release()
		require.NoError(t, <-got)
		keep()
		require.Empty(t, g.accounts)
		require.Empty(t, g.hosts)
	})

	t.Run("LineIsBounded", func(t *testing.T) {
		t.Parallel()
		g, a, keep, release := fullAccount(t)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := g.Acquire(ctx, a, "https://h.example/", time.Hour)
				got <- err
			}()
		}
		require.Eventually(t, func() bool { return g.waiting(a) == 2 }, time.Minute, time.Millisecond)
		// The line (as long as the bound) is full: refused at once, and the
		// account counts as busy before any work.
		_, err := g.Acquire(context.Background(), a, "https://h.example/", time.Hour)
		require.Error(t, err)
		require.Error(t, g.AccountBusy(a))
		// Waiters whose context ends leave the line, having counted nothing.
		cancel()
		var busy *BusyError
		require.ErrorAs(t, <-got, &busy)
		require.ErrorAs(t, <-got, &busy)
		require.NoError(t, g.AccountBusy(a))
		n, _ := g.InFlight(a, "https://h.example/")
		require.Equal(t, 2, n)
		release()
		keep()
		require.Empty(t, g.accounts)
	})

	t.Run("WakeForAnUnusableSlotIsHandedOn", func(t *testing.T) {
		t.Parallel()
		// B and C wait for a slot of the host. When one frees, B (first in
		// line) is woken but its own account is full by then: C must get
		// the slot.
		g := stoppedClock(NewGate(Limits{PerAccount: 2, PerHost: 3}))
		b, c := uuid.New(), uuid.New()
		const slow = "https://slow.example/"
		keepX := moving(t, g, uuid.New(), slow)
		releaseY, err := g.Admit(uuid.New(), slow)
		require.NoError(t, err)
		releaseZ, err := g.Admit(uuid.New(), slow)
		require.NoError(t, err)
		keepB := moving(t, g, b, "https://other.example/")
		bGot, cGot := make(chan error, 1), make(chan error, 1)
		go func() {
			r, err := g.Acquire(context.Background(), b, slow, time.Hour)
			if err == nil {
				r()
			}
			bGot <- err
		}()
		require.Eventually(t, func() bool { return g.waitingHost("slow.example") == 1 }, time.Minute, time.Millisecond)
		go func() {
			r, err := g.Acquire(context.Background(), c, slow, time.Hour)
			if err == nil {
				r()
			}
			cGot <- err
		}()
		require.Eventually(t, func() bool { return g.waitingHost("slow.example") == 2 }, time.Minute, time.Millisecond)
		// B's account fills before the host frees.
		releaseB, err := g.Admit(b, "https://other.example/")
		require.NoError(t, err)
		releaseY()
		require.NoError(t, <-cGot, "the wake-up B could not use went to C")
		// B now waits for its account; when that frees, it gets both.
		require.Eventually(t, func() bool { return g.waiting(b) == 1 }, time.Minute, time.Millisecond)
		releaseB()
		require.NoError(t, <-bGot)
		keepX()
		releaseZ()
		keepB()
		require.Empty(t, g.accounts)
		require.Empty(t, g.hosts)
	})

	t.Run("NoLineBehindHeldPushes", func(t *testing.T) {
		t.Parallel()
		// Pushes none of which ended (or none within AdmitWait) are held
		// by a slow endpoint, and waiting behind them would only hold
		// workers: refused at once, and busy before any work.
		g := stoppedClock(NewGate(Limits{PerAccount: 2, PerHost: 10}))
		a := uuid.New()
		for range 2 {
			_, err := g.Admit(a, "https://slow.example/")
			require.NoError(t, err)
		}
		_, err := g.Acquire(context.Background(), a, "https://slow.example/", time.Hour)
		require.Error(t, err)
		require.Error(t, g.AccountBusy(a))

		now := time.Now()
		g.now = func() time.Time { return now }
		b := uuid.New()
		moving(t, g, b, "https://h.example/")
		_, err = g.Admit(b, "https://h.example/")
		require.NoError(t, err)
		require.NoError(t, g.AccountBusy(b))
		now = now.Add(AdmitWait)
		require.Error(t, g.AccountBusy(b))
		_, err = g.Acquire(context.Background(), b, "https://h.example/", time.Hour)
		require.Error(t, err)
	})

	t.Run("NeverOverBounds", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Limits{PerAccount: 3, PerHost: 4})
		accounts := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
		hosts := []string{"https://a.example/", "https://b.example/"}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			over []string
		)
		for i := range 300 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				acct, host := accounts[i%3], hosts[i%2]
				release, err := g.Acquire(context.Background(), acct, host, 50*time.Millisecond)
				if err != nil {
					return
				}
				n, h := g.InFlight(acct, host)
				if n > 3 || h > 4 {
					mu.Lock()
					over = append(over, host)
					mu.Unlock()
				}
				time.Sleep(time.Millisecond) // hold the slot as a push does
				release()
			}()
		}
		wg.Wait()
		require.Empty(t, over)
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

// waiting and waitingHost return the length of a key's line.
func (g *Gate) waiting(account uuid.UUID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.accounts[account]; a != nil {
		return a.waiting.Len()
	}
	return 0
}

func (g *Gate) waitingHost(host string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.hosts[host]; h != nil {
		return h.waiting.Len()
	}
	return 0
}

// stoppedClock makes g's clock stand still, so that whether a key's pushes
// are moving does not depend on how fast the test runs.
func stoppedClock(g *Gate) *Gate {
	now := time.Now()
	g.now = func() time.Time { return now }
	return g
}

// moving admits two pushes of account to rawURL and ends one now, so that
// the account's and the host's pushes count as moving; it returns the
// release of the other.
func moving(t *testing.T, g *Gate, account uuid.UUID, rawURL string) (release func()) {
	t.Helper()
	ended, err := g.Admit(account, rawURL)
	require.NoError(t, err)
	release, err = g.Admit(account, rawURL)
	require.NoError(t, err)
	ended()
	return release
}

// fullAccount is a stopped-clock gate of 2 pushes per account holding one
// account's two: one that keeps moving (keep ends it) and one admitted
// (release ends it), so the next push of the account must wait in line.
func fullAccount(t *testing.T) (g *Gate, account uuid.UUID, keep, release func()) {
	t.Helper()
	g = stoppedClock(NewGate(Limits{PerAccount: 2, PerHost: 10}))
	account = uuid.New()
	keep = moving(t, g, account, "https://h.example/")
	release, err := g.Admit(account, "https://h.example/")
	require.NoError(t, err)
	return g, account, keep, release
}
