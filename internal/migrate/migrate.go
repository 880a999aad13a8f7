// Package migrate applies River's migrations and then mailwatch's own, in
// order, each in its own transaction, under an advisory lock so that two
// concurrent runs cannot interleave. Running it again is a no-op.
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/schema"
)

// lockID is an arbitrary constant identifying mailwatch's migration lock.
const lockID = 7_366_001_042

// Migration is one of mailwatch's own schema files.
type Migration struct {
	Version string // file name without ".sql", e.g. "0001_foundation"
	SQL     string
}

// Migrations returns mailwatch's migrations in the order they apply.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(schema.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(schema.FS, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: strings.TrimSuffix(n, ".sql"), SQL: string(b)})
	}
	return out, nil
}

// Up brings the database to the latest schema and returns the versions it
// applied (River's as "river:N", ours by name).
func Up(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("error acquiring connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("error taking migration lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID) }()

	var applied []string
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("error creating River migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("error applying River migrations: %w", err)
	}
	for _, v := range res.Versions {
		applied = append(applied, fmt.Sprintf("river:%d", v.Version))
	}

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS mailwatch_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("error creating migrations table: %w", err)
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	for _, m := range migrations {
		done, err := dbutil.WithTxV(ctx, conn, func(ctx context.Context, tx pgx.Tx) (bool, error) {
			tag, err := tx.Exec(ctx, "INSERT INTO mailwatch_migrations (version) VALUES ($1) ON CONFLICT DO NOTHING", m.Version)
			if err != nil {
				return false, err
			}
			if tag.RowsAffected() == 0 {
				return false, nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return false, fmt.Errorf("error applying migration %s: %w", m.Version, err)
			}
			return true, nil
		})
		if err != nil {
			return applied, err
		}
		if done {
			applied = append(applied, m.Version)
			logger.InfoContext(ctx, "applied migration", slog.String("version", m.Version))
		}
	}
	return applied, nil
}
