// Package dbutil holds the small amount of glue every database caller
// shares: the executor interface, transaction helpers and error checks.
package dbutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Executor is what both a pool and a transaction provide: queries plus the
// ability to begin a (sub)transaction. Beginning on a pgx.Tx makes a
// savepoint, so services written against Executor run unchanged inside a
// test's transaction.
type Executor interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ Executor = (*pgxpool.Pool)(nil)
	_ Executor = (pgx.Tx)(nil)
)

// rollbackTimeout bounds a rollback that runs after the caller's context was
// cancelled, so a cancelled request cannot leave a transaction open.
const rollbackTimeout = 5 * time.Second

// WithTx runs fn in a transaction begun on exec and commits it when fn
// returns nil.
func WithTx(ctx context.Context, exec Executor, fn func(ctx context.Context, tx pgx.Tx) error) error {
	_, err := WithTxV(ctx, exec, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
		return struct{}{}, fn(ctx, tx)
	})
	return err
}

// WithTxV is WithTx for functions that return a value.
func WithTxV[T any](ctx context.Context, exec Executor, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	var zero T
	tx, err := exec.Begin(ctx)
	if err != nil {
		return zero, fmt.Errorf("error beginning transaction: %w", err)
	}
	defer func() {
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rbCtx) // no-op after a commit
	}()
	v, err := fn(ctx, tx)
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(ctx); err != nil {
		return zero, fmt.Errorf("error committing transaction: %w", err)
	}
	return v, nil
}

// IsUniqueViolation reports whether err is a unique violation of the named
// constraint or index (any constraint when name is empty).
func IsUniqueViolation(err error, name string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return name == "" || pgErr.ConstraintName == name
}

// IsNotFound reports whether err is pgx's no-rows error.
func IsNotFound(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// IsSerializationFailure reports whether err is a retryable conflict.
func IsSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// AfterConnect prepares a new connection: google/uuid values are encoded
// natively instead of through database/sql's Valuer (a text round trip).
func AfterConnect(_ context.Context, conn *pgx.Conn) error {
	registerUUID(conn.TypeMap())
	return nil
}

// DefaultConnectTimeout bounds opening one Postgres connection unless the
// URL sets connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// NewPool opens a pgx pool for url with at most maxConns connections.
func NewPool(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	return NewPoolWith(ctx, url, PoolOptions{MaxConns: maxConns})
}

// PoolOptions tune NewPoolWith.
type PoolOptions struct {
	// MaxConns caps the pool; 0 keeps pgx's default (or the URL's
	// pool_max_conns).
	MaxConns int
	// StatementTimeout, when positive, is the server's statement_timeout on
	// every connection (unless the URL sets one): a merely slow statement is
	// cancelled by Postgres and the connection stays usable. Only for pools
	// that run no long statements on purpose (migrations, River's
	// maintenance): the API's.
	StatementTimeout time.Duration
}

// NewPoolWith opens a pgx pool for url.
func NewPoolWith(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok && opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(opts.StatementTimeout.Milliseconds())
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	// Every statement mailwatch runs is short and planned often; Postgres
	// compiles a plan to machine code once its estimated cost passes
	// jit_above_cost, and that compilation (20 to 100 ms measured on the
	// dashboard's aggregates) costs more than the queries themselves. The
	// URL's jit parameter overrides this.
	if _, ok := cfg.ConnConfig.RuntimeParams["jit"]; !ok {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// A frozen or unreachable server must not hold a request for the whole
	// REQUEST_TIMEOUT while a new connection waits (connect_timeout in the
	// URL overrides this).
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.AfterConnect = AfterConnect
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "mailwatch"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error opening database pool: %w", err)
	}
	return pool, nil
}

// Tx is an alias of pgx.Tx so callers of WithTx need not import pgx.
type Tx = pgx.Tx
