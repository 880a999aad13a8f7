package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/queues"
)

type completeProbeArgs struct {
	Fail bool `json:"fail"`
}

func (completeProbeArgs) Kind() string { return "complete_probe" }

// completeProbe is what a probe job saw right after completeInTx returned,
// read on the pool (outside the job's transaction).
type completeProbe struct {
	err   error
	state string
	marks int
}

var errProbe = errors.New("probe failure")

// completeProbeWorker writes a mark in completeInTx's transaction, fails
// it on demand, then reports what committed.
type completeProbeWorker struct {
	river.WorkerDefaults[completeProbeArgs]
	pool *pgxpool.Pool
	seen chan completeProbe
}

func (w *completeProbeWorker) Work(ctx context.Context, job *river.Job[completeProbeArgs]) error {
	err := completeInTx(ctx, w.pool, job, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO complete_marks (job_id) VALUES ($1)", job.ID); err != nil {
			return err
		}
		if job.Args.Fail {
			return errProbe
		}
		return nil
	})
	p := completeProbe{err: err}
	if qerr := w.pool.QueryRow(ctx, "SELECT state::text, (SELECT count(*) FROM complete_marks WHERE job_id = $1) FROM river_job WHERE id = $1",
		job.ID).Scan(&p.state, &p.marks); qerr != nil {
		p.err = errors.Join(p.err, qerr)
	}
	w.seen <- p
	return err
}

// TestCompleteInTxCommitsTheJobWithItsWrites runs real jobs through a River
// client: a job whose step succeeds is completed in the step's own
// transaction (completed, with its write, before Work returns), and a step
// that fails rolls back both (not completed, no write).
func TestCompleteInTxCommitsTheJobWithItsWrites(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE TABLE complete_marks (job_id bigint NOT NULL)")
	require.NoError(t, err)

	worker := &completeProbeWorker{pool: pool, seen: make(chan completeProbe, 1)}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{queues.Default: {MaxWorkers: 1}},
	})
	require.NoError(t, err)
	finished, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

	ok, err := client.Insert(ctx, completeProbeArgs{}, nil)
	require.NoError(t, err)
	p := <-worker.seen
	require.NoError(t, p.err)
	require.Equal(t, "completed", p.state, "completed by the step's transaction, before River's own completer")
	require.Equal(t, 1, p.marks)
	ev := <-finished
	require.Equal(t, river.EventKindJobCompleted, ev.Kind)
	require.Equal(t, ok.Job.ID, ev.Job.ID)

	failed, err := client.Insert(ctx, completeProbeArgs{Fail: true}, &river.InsertOpts{MaxAttempts: 1})
	require.NoError(t, err)
	p = <-worker.seen
	require.ErrorIs(t, p.err, errProbe)
	require.Equal(t, "running", p.state, "the failed step did not complete the job")
	require.Zero(t, p.marks, "the failed step's write is rolled back")
	ev = <-finished
	require.Equal(t, river.EventKindJobFailed, ev.Kind)
	require.Equal(t, failed.Job.ID, ev.Job.ID)
	var marks int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM complete_marks").Scan(&marks))
	require.Equal(t, 1, marks, "only the successful job's write is kept")
}
