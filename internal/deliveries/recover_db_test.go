package deliveries

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
)

// manyQueue is a River stand-in recording the deliveries given a job.
type manyQueue struct {
	mu     sync.Mutex
	next   int64
	queued map[uuid.UUID]int
	opts   []*river.InsertOpts
}

func (q *manyQueue) InsertManyTx(_ context.Context, _ pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*rivertype.JobInsertResult, len(params))
	for i, p := range params {
		q.next++
		q.queued[p.Args.(events.DeliveryArgs).DeliveryID]++
		q.opts = append(q.opts, p.InsertOpts)
		out[i] = &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: q.next}}
	}
	return out, nil
}

func TestRecoverRange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(-time.Hour)
	since, end, err := RecoverRange(now.Add(-2*time.Hour), nil, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-2*time.Hour), since)
	require.Equal(t, now, end, "until defaults to now")
	_, end, err = RecoverRange(now.Add(-2*time.Hour), &until, now)
	require.NoError(t, err)
	require.Equal(t, until, end)
	later := now.Add(time.Hour)
	_, end, err = RecoverRange(now.Add(-2*time.Hour), &later, now)
	require.NoError(t, err)
	require.Equal(t, now, end, "a future until is now")
	var re *RangeError
	_, _, err = RecoverRange(now.Add(-RecoverMaxAge-time.Second), nil, now)
	require.True(t, errors.As(err, &re) && re.Field == "since", "%v", err)
	_, _, err = RecoverRange(now.Add(time.Minute), nil, now)
	require.True(t, errors.As(err, &re) && re.Field == "since", "%v", err)
	_, _, err = RecoverRange(until, &until, now)
	require.True(t, errors.As(err, &re) && re.Field == "until", "%v", err)
}

// TestRecoverConcurrentAndBounded: concurrent runs over one range queue
// each failed delivery of it exactly once, and nothing else; a run stops
// at its bound and says so, and the next run takes the rest.
//
// Not parallel: it lowers recoverMaxPerRun.
func TestRecoverConcurrentAndBounded(t *testing.T) {
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	f := newFixtureIn(t, tx)
	other := newFixtureIn(t, tx)
	since := time.Now().Add(-time.Minute)
	const n = 1200
	failed := make([]uuid.UUID, 0, n)
	for range n {
		failed = append(failed, f.delivery(t, StatusFailed, 10, nil, since))
	}
	delivered := f.delivery(t, StatusDelivered, 1, nil, since)
	retrying := f.delivery(t, StatusRetrying, 1, nil, since)
	otherFailed := other.delivery(t, StatusFailed, 10, nil, since)
	until := time.Now().Add(time.Millisecond)
	require.Eventually(t, func() bool { return time.Now().After(until.Add(time.Millisecond)) }, time.Second, time.Millisecond)
	later := f.delivery(t, StatusFailed, 10, nil, since)
	require.NoError(t, tx.Commit(ctx))

	q := &manyQueue{queued: map[uuid.UUID]int{}}
	args := RecoverArgs{AccountID: f.account, SubscriptionID: f.sub, Since: since, Until: until}
	var wg sync.WaitGroup
	outs := make([]RecoverOutput, 3)
	for i := range outs {
		wg.Go(func() {
			out, err := Recover(ctx, pool, q, args, time.Now)
			require.NoError(t, err)
			outs[i] = out
		})
	}
	wg.Wait()
	total := 0
	for _, o := range outs {
		total += o.Requeued
		require.False(t, o.Truncated)
	}
	require.Equal(t, n, total, "%+v", outs)
	require.Len(t, q.queued, n)
	for _, id := range failed {
		require.Equal(t, 1, q.queued[id], "queued once")
	}
	for _, id := range []uuid.UUID{delivered, retrying, otherFailed, later} {
		require.Zero(t, q.queued[id], "not failed, another subscription's, or outside the range")
	}
	require.Equal(t, 1, q.opts[0].MaxAttempts, "one extra attempt, as a manual retry of a failed delivery")
	var retried, maxAttempts int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), min(max_attempts) FROM webhook_deliveries
		WHERE subscription_id = $1 AND status = 'retrying' AND failed_at IS NULL AND next_retry_at IS NOT NULL`, f.sub).Scan(&retried, &maxAttempts))
	require.Equal(t, n, retried, "the recovered ones, due now")
	require.Equal(t, 11, maxAttempts)

	// Bounded: failed again, 1200 take two runs of at most 700.
	_, err = pool.Exec(ctx, "UPDATE webhook_deliveries SET status = 'failed' WHERE id = ANY($1)", failed)
	require.NoError(t, err)
	recoverMaxPerRun = 700
	t.Cleanup(func() { recoverMaxPerRun = RecoverMaxPerRun })
	out, err := Recover(ctx, pool, q, args, time.Now)
	require.NoError(t, err)
	require.Equal(t, RecoverOutput{SubscriptionID: f.sub, Since: since, Until: until, Requeued: 700, Batches: 2, Truncated: true}, out)
	out, err = Recover(ctx, pool, q, args, time.Now)
	require.NoError(t, err)
	require.Equal(t, 500, out.Requeued)
	require.False(t, out.Truncated)
	for _, id := range failed {
		require.Equal(t, 2, q.queued[id])
	}

	// A disabled subscription stops the run.
	_, err = pool.Exec(ctx, "UPDATE webhook_deliveries SET status = 'failed' WHERE id = ANY($1)", failed)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE event_subscriptions SET enabled = false WHERE id = $1", f.sub)
	require.NoError(t, err)
	out, err = Recover(ctx, pool, q, args, time.Now)
	require.NoError(t, err)
	require.Zero(t, out.Requeued)
	require.Equal(t, "the subscription was disabled", out.Stopped)
}
