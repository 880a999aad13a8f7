package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
)

// runCLI runs the real binary and returns its stdout, stderr and exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// TestJobsCommand steers a delivery's job with `mailwatch jobs` the way an
// operator would with River UI, and checks the delivery row follows.
func TestJobsCommand(t *testing.T) {
	t.Parallel()
	var ok atomic.Int32
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	f := newHookFixture(t, rc.URL)
	f.emit(t, 1)
	env := baseEnv(f.url)
	ctx := context.Background()
	var deliveryID string
	var jobID int64
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT id::text, job_id FROM webhook_deliveries").Scan(&deliveryID, &jobID))
	id := strconv.FormatInt(jobID, 10)

	t.Run("Usage", func(t *testing.T) {
		for _, args := range [][]string{{"jobs"}, {"jobs", "frobnicate"}, {"jobs", "retry"}, {"jobs", "retry", "abc"},
			{"jobs", "list", "--state=nope"}, {"jobs", "list", "--limit=0"}, {"jobs", "list", "--colour=red"},
			{"jobs", "rebuild-message-rollups", "--account=nope"}, {"jobs", "rebuild-message-rollups", "--all"}} {
			_, stderr, code := runCLI(t, env, args...)
			require.Equal(t, 2, code, "%v: %s", args, stderr)
			require.Contains(t, stderr, "usage")
		}
		_, stderr, code := runCLI(t, env, "jobs", "retry", "987654321")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "does not exist")
	})

	t.Run("RebuildMessageRollups", func(t *testing.T) {
		account := uuid.New()
		for range 2 {
			out, stderr, code := runCLI(t, env, "jobs", "rebuild-message-rollups", "--account="+account.String())
			require.Zero(t, code, stderr)
			require.Contains(t, out, "message_rollup_rebuild")
		}
		var n int
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'message_rollup_rebuild'
			AND queue = 'maintenance' AND args->>'account_id' = $1`, account.String()).Scan(&n))
		require.Equal(t, 1, n, "queued once while waiting")
	})

	out, stderr, code := runCLI(t, env, "jobs", "list", "--kind="+events.DeliveryKind, "--state=available")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "ID")
	require.Contains(t, out, id+" ")
	require.Contains(t, out, deliveryID, "args carry the delivery id")

	// Cancel the queued job: the command marks the delivery failed at once.
	out, stderr, code = runCLI(t, env, "jobs", "cancel", id)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "cancelled")
	status := func() string {
		var s string
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT status FROM webhook_deliveries WHERE id = $1", deliveryID).Scan(&s))
		return s
	}
	require.Equal(t, "failed", status())

	// Retry it: the row goes back to pending, and a worker delivers it.
	out, stderr, code = runCLI(t, env, "jobs", "retry", id)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "available")
	require.Equal(t, "pending", status())
	n, err := deliveries.Reconcile(ctx, f.pool, &events.Emitter{River: f.client}, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "nothing left for the reconciler")
	startProcess(t, f.workerEnv(t), "worker", "--queues=webhooks")
	require.Eventually(t, func() bool { return status() == "delivered" }, 30*time.Second, 20*time.Millisecond)
	// The receiver also got the webhook_delivery_failed event the
	// cancellation emitted: the subscription takes every type.
	require.Eventually(t, func() bool { return ok.Load() == 2 }, 10*time.Second, 20*time.Millisecond)
	var failedEvents int
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE event_type = $1", events.TypeWebhookDeliveryFailed).Scan(&failedEvents))
	require.Equal(t, 1, failedEvents)

	// River completes the job a moment after the row says delivered.
	require.Eventually(t, func() bool {
		out, stderr, code = runCLI(t, env, "jobs", "list", "--state=completed", "--queue=webhooks", "--limit=5")
		require.Zero(t, code, stderr)
		return strings.Contains(out, id+" ")
	}, 10*time.Second, 50*time.Millisecond, "the retried job is listed as completed")
}

// FuzzParseJobList checks the operator's list flags never panic and that
// anything accepted is a valid River listing.
func FuzzParseJobList(f *testing.F) {
	for _, s := range []string{"--state=available,running", "--kind=a", "--limit=5", "--queue=", "--x", "--limit=-1", "=", "--state=,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		params, err := parseJobList(strings.Fields(arg))
		if err == nil {
			require.NotNil(t, params)
		}
	})
}
