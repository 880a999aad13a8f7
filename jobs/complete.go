package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// completeInTx runs fn in a transaction on pool that also completes job,
// so the job's writes and its completion commit together: an error from
// fn rolls both back and River retries the job; a crash after the commit
// cannot run the writes twice.
func completeInTx[T river.JobArgs](ctx context.Context, pool *pgxpool.Pool, job *river.Job[T],
	fn func(ctx context.Context, tx pgx.Tx) error,
) error {
	return dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return completeJob(job)(ctx, tx)
	})
}

// completeJob is the step that completes job inside a transaction a
// capability opens itself (domains.Checker.Run, domains.ApplyFix): the
// same guarantee as completeInTx when the transaction is not the worker's.
func completeJob[T river.JobArgs](job *river.Job[T]) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
			return fmt.Errorf("completing job %d: %w", job.ID, err)
		}
		return nil
	}
}
