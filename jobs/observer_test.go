package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/queues"
)

type obsOKArgs struct{}

func (obsOKArgs) Kind() string { return "obs_ok" }

type obsFailArgs struct{}

func (obsFailArgs) Kind() string { return "obs_fail" }

// retryInAnHour keeps a failed job retryable for the test's length.
type retryInAnHour struct{}

func (retryInAnHour) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Hour) }

// TestObserverCountsJobOutcomesAndReportsQueues runs real jobs through a
// River client the observer watches: completions, errors (retried) and
// discards are counted per queue and kind, and the job-state gauges read
// River's table (a queue nobody works shows its backlog and its age).
func TestObserverCountsJobOutcomesAndReportsQueues(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	o := NewObserver(pool, logger, reg)

	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[obsOKArgs]) error { return nil }))
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[obsFailArgs]) error { return errors.New("boom") }))
	cfg := &river.Config{
		Logger:            logger,
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{queues.Default: {MaxWorkers: 10}},
		RetryPolicy:       retryInAnHour{},
	}
	o.configure(cfg)
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	require.NoError(t, err)

	// A backlog on a queue this client does not work, made 2 minutes old.
	for range 3 {
		_, err = client.Insert(ctx, obsOKArgs{}, &river.InsertOpts{Queue: queues.DNS})
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, "UPDATE river_job SET scheduled_at = now() - interval '2 minutes' WHERE queue = 'dns'")
	require.NoError(t, err)
	_, err = client.Insert(ctx, obsOKArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	require.NoError(t, client.Start(ctx))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(runCtx, client) }()
	t.Cleanup(func() {
		stop()
		<-done
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})

	for range 5 {
		_, err = client.Insert(ctx, obsOKArgs{}, nil)
		require.NoError(t, err)
	}
	_, err = client.Insert(ctx, obsFailArgs{}, &river.InsertOpts{MaxAttempts: 1})
	require.NoError(t, err)
	_, err = client.Insert(ctx, obsFailArgs{}, &river.InsertOpts{MaxAttempts: 5})
	require.NoError(t, err)

	count := func(c *prometheus.CounterVec, kind string) float64 {
		return testutil.ToFloat64(c.WithLabelValues(queues.Default, kind))
	}
	require.Eventually(t, func() bool {
		return count(o.completions, "obs_ok") == 5 && count(o.errorsTotal, "obs_fail") == 2
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 1.0, count(o.discards, "obs_fail"), "only the job out of attempts is discarded")
	require.Zero(t, count(o.discards, "obs_ok"))
	require.Zero(t, count(o.rescues, "obs_ok"))

	h := o.Health()
	require.True(t, h.Ready, h.Detail)
	require.True(t, h.Running)
	require.Equal(t, 10, h.Queues[queues.Default].Capacity)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mailwatch_river_jobs River jobs per queue, kind and state (available, running, scheduled, retryable), across the fleet.
# TYPE mailwatch_river_jobs gauge
mailwatch_river_jobs{kind="",queue="analysis",state="available"} 0
mailwatch_river_jobs{kind="",queue="analysis",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="analysis",state="running"} 0
mailwatch_river_jobs{kind="",queue="analysis",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="default",state="available"} 0
mailwatch_river_jobs{kind="",queue="default",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="default",state="running"} 0
mailwatch_river_jobs{kind="",queue="default",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="dns",state="available"} 0
mailwatch_river_jobs{kind="",queue="dns",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="dns",state="running"} 0
mailwatch_river_jobs{kind="",queue="dns",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="maintenance",state="available"} 0
mailwatch_river_jobs{kind="",queue="maintenance",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="maintenance",state="running"} 0
mailwatch_river_jobs{kind="",queue="maintenance",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="transport",state="available"} 0
mailwatch_river_jobs{kind="",queue="transport",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="transport",state="running"} 0
mailwatch_river_jobs{kind="",queue="transport",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="reputation",state="available"} 0
mailwatch_river_jobs{kind="",queue="reputation",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="reputation",state="running"} 0
mailwatch_river_jobs{kind="",queue="reputation",state="scheduled"} 0
mailwatch_river_jobs{kind="",queue="webhooks",state="available"} 0
mailwatch_river_jobs{kind="",queue="webhooks",state="retryable"} 0
mailwatch_river_jobs{kind="",queue="webhooks",state="running"} 0
mailwatch_river_jobs{kind="",queue="webhooks",state="scheduled"} 0
mailwatch_river_jobs{kind="obs_fail",queue="default",state="retryable"} 1
mailwatch_river_jobs{kind="obs_ok",queue="default",state="scheduled"} 1
mailwatch_river_jobs{kind="obs_ok",queue="dns",state="available"} 3
`), "mailwatch_river_jobs"))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	ages := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "mailwatch_river_oldest_available_job_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			ages[labels] = m.GetGauge().GetValue()
		}
	}
	require.InDelta(t, 120, ages["kind=obs_ok,queue=dns,"], 10, "%v", ages)
	require.Zero(t, ages["kind=,queue=webhooks,"], "an empty queue reports zero: %v", ages)
	require.Eventually(t, func() bool { return testutil.ToFloat64(o.leaderGauge) == 1 }, 30*time.Second, 50*time.Millisecond,
		"the only client is elected leader")
	require.True(t, o.Health().Leader)
}
