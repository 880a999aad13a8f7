package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

func TestCoalescerBatchesWhatArrivesWhileABatchRuns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		batches [][]int
	)
	c := &coalescer[int, string]{
		maxBatch: 10, maxFlushers: 1, timeout: time.Second,
		run: func(_ context.Context, ins []int, outs []string, errs []error) {
			mu.Lock()
			first := len(batches) == 0
			batches = append(batches, append([]int(nil), ins...))
			mu.Unlock()
			if first {
				<-release // hold the first batch until the others queue up
			}
			for i, in := range ins {
				if in%7 == 0 {
					errs[i] = fmt.Errorf("no %d", in)
					continue
				}
				outs[i] = fmt.Sprint("r", in)
			}
		},
	}
	const n = 25
	type result struct {
		out string
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, err := c.do(0)
		results[0] = result{out, err}
	}()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 }, 5*time.Second, time.Millisecond)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.do(i)
			results[i] = result{out, err}
		}()
	}
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == n-1 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()

	// One flusher: the first request alone, then the 24 that waited, in
	// batches of at most 10.
	require.Len(t, batches, 4)
	require.Equal(t, []int{0}, batches[0])
	require.Len(t, batches[1], 10)
	require.Len(t, batches[2], 10)
	require.Len(t, batches[3], 4)
	for i, r := range results {
		if i%7 == 0 {
			require.EqualError(t, r.err, fmt.Sprintf("no %d", i), "each caller gets its own error")
			continue
		}
		require.NoError(t, r.err)
		require.Equal(t, fmt.Sprint("r", i), r.out, "each caller gets its own result")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Zero(t, c.flushers, "the flusher ends when nothing is pending")
}

func TestCoalescerRunsAloneWhenIdle(t *testing.T) {
	t.Parallel()
	var sizes []int
	c := &coalescer[int, int]{
		maxBatch: 10, maxFlushers: 2, timeout: time.Second,
		run: func(_ context.Context, ins []int, outs []int, _ []error) {
			sizes = append(sizes, len(ins))
			for i, in := range ins {
				outs[i] = in * 2
			}
		},
	}
	for i := range 5 {
		out, err := c.do(i)
		require.NoError(t, err)
		require.Equal(t, i*2, out)
	}
	require.Equal(t, []int{1, 1, 1, 1, 1}, sizes, "a lone request is not held back for company")
}

// TestStartManyIsolatesAFailingRun checks that when the coalesced
// statement fails, the runs are retried one by one, so one run's error is
// not its batch-mates'.
func TestStartManyIsolatesAFailingRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keyring: keyring}
	inserter, err := NewClient(deps, Options{}) // inserts only: nothing works the jobs
	require.NoError(t, err)
	e := &whEnv{pool: pool, client: inserter, keyring: keyring, account: uuid.Must(uuid.NewV7())}
	_, err = pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", e.account, e.account.String()+"@example.com")
	require.NoError(t, err)
	e.subscribe(t, "http://127.0.0.1:9/hook", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", nil)

	var ds []dbsqlc.WebhookDelivery
	for range 2 {
		ds = append(ds, e.only(t, e.emit(t, messageEvent(e.account)).ID))
	}
	w := NewDeliveryWorker(deps)
	// The second delivery has an attempt with the id its run brings: that
	// run's insert fails (an attempt's key is (delivery_id, id)).
	clash := uuid.Must(uuid.NewV7())
	_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (id, delivery_id, started_at, finished_at) VALUES ($1, $2, now(), now())`, clash, ds[1].ID)
	require.NoError(t, err)
	ins := make([]deliveries.StartIn, len(ds))
	for i, d := range ds {
		ins[i] = deliveries.StartIn{DeliveryID: d.ID, JobID: *d.JobID, AttemptID: uuid.Must(uuid.NewV7()), JobAttempt: 1, AttemptsLeft: 7, StartedAt: time.Now().UTC()}
	}
	ins[1].AttemptID = clash
	outs, errs := make([]*deliveries.Started, 2), make([]error, 2)
	w.startMany(ctx, ins, outs, errs)
	_, err = pool.Exec(ctx, `DELETE FROM webhook_delivery_attempts WHERE id = $1`, clash)
	require.NoError(t, err)

	require.NoError(t, errs[0])
	require.NotNil(t, outs[0], "the first run starts on its own")
	require.Equal(t, ds[0].ID, outs[0].Delivery.ID)
	require.EqualValues(t, 1, outs[0].Delivery.Attempts)
	require.Error(t, errs[1])
	var pgErr interface{ SQLState() string }
	require.True(t, errors.As(errs[1], &pgErr))
	require.Equal(t, "23505", pgErr.SQLState())
	require.Nil(t, outs[1])

	q := dbsqlc.New()
	for i, want := range []int32{1, 0} {
		d, err := q.DeliveryGetByID(ctx, pool, dbsqlc.DeliveryGetByIDParams{ID: ds[i].ID, AccountID: e.account})
		require.NoError(t, err)
		require.Equal(t, want, d.Attempts, "delivery %d", i)
	}
	require.Len(t, e.attempts(t, ds[0].ID), 1)
	require.Empty(t, e.attempts(t, ds[1].ID), "the failed run left nothing behind")

	// A run whose job does not own the delivery is not started: it takes
	// the slow path.
	outs, errs = make([]*deliveries.Started, 1), make([]error, 1)
	w.startMany(ctx, []deliveries.StartIn{{DeliveryID: ds[1].ID, JobID: *ds[1].JobID + 1000, AttemptID: uuid.Must(uuid.NewV7()),
		JobAttempt: 1, AttemptsLeft: 7, StartedAt: time.Now().UTC()}}, outs, errs)
	require.NoError(t, errs[0])
	require.Nil(t, outs[0])

	// Two jobs of one delivery in one batch (an operator re-ran an old
	// job): only the owner's run starts, with its own attempt.
	owner := deliveries.StartIn{DeliveryID: ds[1].ID, JobID: *ds[1].JobID, AttemptID: uuid.Must(uuid.NewV7()),
		JobAttempt: 1, AttemptsLeft: 7, StartedAt: time.Now().UTC()}
	stranger := owner
	stranger.JobID, stranger.AttemptID = owner.JobID+1000, uuid.Must(uuid.NewV7())
	outs, errs = make([]*deliveries.Started, 2), make([]error, 2)
	w.startMany(ctx, []deliveries.StartIn{owner, stranger}, outs, errs)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.NotNil(t, outs[0], "the owner's run starts")
	require.Equal(t, owner.AttemptID, outs[0].AttemptID)
	require.Nil(t, outs[1], "the other job's run takes the slow path")
	atts := e.attempts(t, ds[1].ID)
	require.Len(t, atts, 1)
	require.Equal(t, owner.AttemptID, atts[0].ID)
}
