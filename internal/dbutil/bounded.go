package dbutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StatementTimeoutError is a statement (with the wait for a pooled
// connection before it) that got no answer within the bound of Bounded:
// the server is frozen, unreachable without a reset, or the statement is
// that slow. The caller's own context had not ended.
type StatementTimeoutError struct {
	Timeout time.Duration
	Err     error
}

func (e *StatementTimeoutError) Error() string {
	return fmt.Sprintf("the database did not answer within %s: %v", e.Timeout, e.Err)
}

func (e *StatementTimeoutError) Unwrap() error { return e.Err }

// IsStatementTimeout reports whether err is a statement cut by Bounded's
// deadline.
func IsStatementTimeout(err error) bool {
	var st *StatementTimeoutError
	return errors.As(err, &st)
}

// Bounded wraps exec so that every statement it runs (Exec, Query until its
// rows are closed, QueryRow until Scan, SendBatch until Close, CopyFrom,
// Begin, and the same on the transactions it begins, Commit and Rollback
// included) ends within timeout, however long the caller's context lives.
// pgx bounds a new connection (connect_timeout) but not a statement on an
// open one: a frozen Postgres, whose kernel still acknowledges TCP, would
// hold it until the caller's own deadline. When the bound cuts a statement
// pgx closes that connection and the error is a *StatementTimeoutError.
// Waiting for a pooled connection counts against the same bound.
//
// timeout <= 0 returns exec unchanged.
func Bounded(exec Executor, timeout time.Duration) Executor {
	if timeout <= 0 {
		return exec
	}
	return &bounded{exec: exec, timeout: timeout}
}

type bounded struct {
	exec    Executor
	timeout time.Duration
}

var _ Executor = (*bounded)(nil)

// boundCtx derives the statement's context and returns the error
// translation for it.
func boundCtx(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc, func(error) error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	return ctx, cancel, func(err error) error {
		if err == nil || parent.Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err
		}
		var already *StatementTimeoutError
		if errors.As(err, &already) {
			return err
		}
		return &StatementTimeoutError{Timeout: timeout, Err: err}
	}
}

func (b *bounded) Begin(ctx context.Context) (pgx.Tx, error) {
	return boundedBegin(ctx, b.exec.Begin, b.timeout)
}

func (b *bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return boundedExec(ctx, b.exec.Exec, b.timeout, sql, args)
}

func (b *bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return boundedQuery(ctx, b.exec.Query, b.timeout, sql, args)
}

func (b *bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return boundedQueryRow(ctx, b.exec.QueryRow, b.timeout, sql, args)
}

func (b *bounded) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	ctx, cancel, wrap := boundCtx(ctx, b.timeout)
	defer cancel()
	n, err := b.exec.CopyFrom(ctx, table, cols, src)
	return n, wrap(err)
}

func (b *bounded) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	return boundedSendBatch(ctx, b.exec.SendBatch, b.timeout, batch)
}

func boundedBegin(ctx context.Context, begin func(context.Context) (pgx.Tx, error), timeout time.Duration) (pgx.Tx, error) {
	bctx, cancel, wrap := boundCtx(ctx, timeout)
	defer cancel()
	tx, err := begin(bctx)
	if err != nil {
		return nil, wrap(err)
	}
	return &boundedTx{Tx: tx, timeout: timeout}, nil
}

func boundedExec(ctx context.Context, exec func(context.Context, string, ...any) (pgconn.CommandTag, error), timeout time.Duration, sql string, args []any) (pgconn.CommandTag, error) {
	ctx, cancel, wrap := boundCtx(ctx, timeout)
	defer cancel()
	tag, err := exec(ctx, sql, args...)
	return tag, wrap(err)
}

func boundedQuery(ctx context.Context, query func(context.Context, string, ...any) (pgx.Rows, error), timeout time.Duration, sql string, args []any) (pgx.Rows, error) {
	ctx, cancel, wrap := boundCtx(ctx, timeout)
	rows, err := query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, wrap(err)
	}
	return &boundedRows{Rows: rows, cancel: cancel, wrap: wrap}, nil
}

func boundedQueryRow(ctx context.Context, queryRow func(context.Context, string, ...any) pgx.Row, timeout time.Duration, sql string, args []any) pgx.Row {
	ctx, cancel, wrap := boundCtx(ctx, timeout)
	return &boundedRow{row: queryRow(ctx, sql, args...), cancel: cancel, wrap: wrap}
}

func boundedSendBatch(ctx context.Context, send func(context.Context, *pgx.Batch) pgx.BatchResults, timeout time.Duration, batch *pgx.Batch) pgx.BatchResults {
	ctx, cancel, wrap := boundCtx(ctx, timeout)
	return &boundedBatch{br: send(ctx, batch), cancel: cancel, wrap: wrap, timeout: timeout}
}

// boundedRows releases the statement's deadline when the rows are closed
// (pgx closes them itself once Next returns false).
type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
	wrap   func(error) error
}

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.cancel()
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

func (r *boundedRows) Err() error { return r.wrap(r.Rows.Err()) }

func (r *boundedRows) Scan(dest ...any) error { return r.wrap(r.Rows.Scan(dest...)) }

type boundedRow struct {
	row    pgx.Row
	cancel context.CancelFunc
	wrap   func(error) error
}

func (r *boundedRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.wrap(r.row.Scan(dest...))
}

type boundedBatch struct {
	br      pgx.BatchResults
	cancel  context.CancelFunc
	wrap    func(error) error
	timeout time.Duration
}

func (b *boundedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.br.Exec()
	return tag, b.wrap(err)
}

func (b *boundedBatch) Query() (pgx.Rows, error) {
	rows, err := b.br.Query()
	if err != nil {
		return rows, b.wrap(err)
	}
	return &boundedRows{Rows: rows, cancel: func() {}, wrap: b.wrap}, nil
}

func (b *boundedBatch) QueryRow() pgx.Row {
	return &boundedRow{row: b.br.QueryRow(), cancel: func() {}, wrap: b.wrap}
}

// Tx is the transaction a batch began (Batch.BeginTx), bounded as well.
func (b *boundedBatch) Tx() pgx.Tx {
	tx := b.br.Tx()
	if tx == nil {
		return nil
	}
	return &boundedTx{Tx: tx, timeout: b.timeout}
}

func (b *boundedBatch) Close() error {
	defer b.cancel()
	return b.wrap(b.br.Close())
}

// boundedTx is a transaction of Bounded: each statement, the commit and
// the rollback get the bound; the time between them does not count.
type boundedTx struct {
	pgx.Tx
	timeout time.Duration
}

func (t *boundedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	return boundedBegin(ctx, t.Tx.Begin, t.timeout)
}

func (t *boundedTx) Commit(ctx context.Context) error {
	ctx, cancel, wrap := boundCtx(ctx, t.timeout)
	defer cancel()
	return wrap(t.Tx.Commit(ctx))
}

func (t *boundedTx) Rollback(ctx context.Context) error {
	ctx, cancel, wrap := boundCtx(ctx, t.timeout)
	defer cancel()
	return wrap(t.Tx.Rollback(ctx))
}

func (t *boundedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return boundedExec(ctx, t.Tx.Exec, t.timeout, sql, args)
}

func (t *boundedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return boundedQuery(ctx, t.Tx.Query, t.timeout, sql, args)
}

func (t *boundedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return boundedQueryRow(ctx, t.Tx.QueryRow, t.timeout, sql, args)
}

func (t *boundedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	ctx, cancel, wrap := boundCtx(ctx, t.timeout)
	defer cancel()
	n, err := t.Tx.CopyFrom(ctx, table, cols, src)
	return n, wrap(err)
}

func (t *boundedTx) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	return boundedSendBatch(ctx, t.Tx.SendBatch, t.timeout, batch)
}

func (t *boundedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	ctx, cancel, wrap := boundCtx(ctx, t.timeout)
	defer cancel()
	d, err := t.Tx.Prepare(ctx, name, sql)
	return d, wrap(err)
}
