package transport_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/transport"
	"github.com/mailwatch/mailwatch/jobs"
)

// Schedule queues one probe per domain on the transport queue, spread over
// the interval at a stable offset, and not twice within it; QueueProbe does
// not queue a second probe while one is waiting.
func TestScheduleAndQueueProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	a := testfactory.AccountDomain(t, pool, "a.sched.test")
	testfactory.AccountDomain(t, pool, "b.sched.test")
	// Creating a domain queues its DNS check only.
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'transport_probe' AND queue = 'transport'`).Scan(&n))
		return n
	}
	require.Zero(t, count())

	now := time.Now()
	n, err := transport.Schedule(ctx, pool, client, now)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = transport.Schedule(ctx, pool, client, now)
	require.NoError(t, err)
	require.Zero(t, n, "already scheduled in this interval")
	require.Equal(t, 2, count())
	var earliest, latest time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT min(scheduled_at), max(scheduled_at) FROM river_job WHERE kind = 'transport_probe'`).Scan(&earliest, &latest))
	require.False(t, earliest.Before(now.Add(-time.Second)))
	require.True(t, latest.Before(now.Add(transport.ProbeInterval)))

	first, err := transport.QueueProbe(ctx, pool, client, a.ID)
	require.NoError(t, err)
	again, err := transport.QueueProbe(ctx, pool, client, a.ID)
	require.NoError(t, err)
	require.Equal(t, first, again, "a probe waiting to run is not queued twice")
}
