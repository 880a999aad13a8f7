package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// SMTP_PROBE=off (no Deps.Transport) schedules no probes, and a probe
// queued before it was turned off completes without probing.
func TestTransportJobsWithProbingOff(t *testing.T) {
	t.Parallel()
	require.Empty(t, transportPeriodicJobs(Deps{}))
	require.Len(t, transportPeriodicJobs(Deps{Transport: &transport.Service{}}), 1)
	for _, args := range []interface {
		river.JobArgs
		river.JobArgsWithInsertOpts
	}{transport.ProbeArgs{}, transport.ScheduleArgs{}} {
		require.Contains(t, queues.All, args.InsertOpts().Queue, args.Kind())
	}

	pool, _ := dbtest.NewDB(t)
	client, err := NewClient(Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Options{Concurrency: 2, Queues: []string{queues.Transport}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	d := testfactory.AccountDomain(t, pool, "off.transport.test")
	id, err := transport.QueueProbe(ctx, pool, client, d.ID)
	require.NoError(t, err)
	for ev := range done {
		if ev.Job.ID == id {
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State)
			break
		}
	}
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mx_probe_results`).Scan(&rows))
	require.Zero(t, rows)
}
