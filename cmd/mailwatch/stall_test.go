package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRescueWindowStallAndDuplicates measures the trade JOB_RESCUE_AFTER
// makes, with a short window (10 s) against a receiver that takes 4 s per
// push (a healthy but slow endpoint, within the push timeout):
//
//   - healthy slow jobs: the window is longer than every job's timeout, so
//     no job is rescued while it runs: every delivery arrives exactly once;
//   - a worker killed with pushes in flight: the new leader's rescuer
//     retries them after the window; the stall (kill to last arrival) and
//     the duplicates (pushes the dead worker had sent) are reported.
func TestRescueWindowStallAndDuplicates(t *testing.T) {
	t.Parallel()
	const slow = 4 * time.Second
	var (
		mu      sync.Mutex
		got     = map[string]int{}
		started int
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		started++
		mu.Unlock()
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		got[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	arrivals := func() (unique, dup, begun int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range got {
			dup += n - 1
		}
		return len(got), dup, started
	}
	f := newHookFixture(t, rc.URL)
	env := func() []string {
		return append(baseEnv(f.url),
			"METRICS_ADDR="+freeAddr(t),
			"WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32,::1/128",
			"JOB_RESCUE_AFTER=10s",
			"LOG_LEVEL=warn",
		)
	}
	delivered := func() int {
		return f.count(t, "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'")
	}

	// Healthy, slow: nothing rescued, nothing twice.
	w1 := startProcess(t, env(), "worker", "--queues=webhooks,default,maintenance")
	f.emit(t, 20)
	require.Eventually(t, func() bool { return delivered() == 20 }, 60*time.Second, 50*time.Millisecond, w1.log())
	unique, dup, _ := arrivals()
	require.Equal(t, 20, unique)
	require.Zero(t, dup, "a healthy slow push is never rescued while it runs")
	require.Zero(t, f.count(t, "SELECT count(*) FROM river_job WHERE errors::text LIKE '%rescued%'"))

	// Killed mid-push: pushes in flight wait for the rescue window.
	f.emit(t, 20)
	require.Eventually(t, func() bool { _, _, begun := arrivals(); return begun >= 40 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, w1.cmd.Process.Signal(syscall.SIGKILL))
	err := <-w1.done
	w1.done <- err
	killed := time.Now()
	inFlight := f.count(t, "SELECT count(*) FROM river_job WHERE state = 'running'")
	require.Positive(t, inFlight)
	w2 := startProcess(t, env(), "worker", "--queues=webhooks,default,maintenance")
	require.Eventually(t, func() bool { return delivered() == 40 }, 120*time.Second, 50*time.Millisecond, w2.log())
	stall := time.Since(killed)
	unique, dup, _ = arrivals()
	require.Equal(t, 40, unique, "no delivery lost")
	require.Positive(t, f.count(t, "SELECT count(*) FROM river_job WHERE errors::text LIKE '%rescued%'"), "the in-flight jobs were rescued")
	require.Greater(t, stall, 10*time.Second, "nothing is retried before the window")
	t.Logf("JOB_RESCUE_AFTER=10s, %s pushes: %d jobs in flight at the kill; all delivered %.1fs after it; %d duplicates (pushes the dead worker had sent but not recorded)",
		slow, inFlight, stall.Seconds(), dup)
}
