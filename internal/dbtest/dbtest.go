// Package dbtest gives tests a real, migrated Postgres.
//
// The server comes from TEST_DATABASE_URL (scripts/test sets it; the
// default is a local server with trust authentication). The first caller in
// a run builds a template database, named after a hash of the migrations,
// under an advisory lock; every test process then clones the template:
//
//   - Tx(t) gives a transaction on the process's shared clone that is
//     rolled back when the test ends: the default, cheap and parallel.
//   - NewDB(t) gives a pool on a fresh clone of its own, dropped when the
//     test ends, for tests that need committed data (LISTEN/NOTIFY, River
//     clients working jobs, concurrent transactions).
//
// Packages that use it call Main from TestMain so the shared clone is
// dropped at exit.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/migrate"
)

// DefaultURL is used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Prefix starts the name of every database this package creates, so that
// scripts/test can sweep leftovers of killed runs.
const Prefix = "mailwatch_t_"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error

	sharedOnce sync.Once
	sharedPool *pgxpool.Pool
	sharedName string
	sharedErr  error
)

// Main runs the package's tests and drops the shared database afterwards.
func Main(m *testing.M) {
	code := m.Run()
	if sharedPool != nil {
		sharedPool.Close()
		_ = dropDatabase(context.Background(), sharedName)
	}
	os.Exit(code)
}

// AdminURL returns the URL of the maintenance database tests connect to.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// URLFor returns a connection URL for database name on the test server.
func URLFor(name string) (string, error) {
	cfg, err := pgx.ParseConfig(AdminURL())
	if err != nil {
		return "", fmt.Errorf("error parsing TEST_DATABASE_URL: %w", err)
	}
	host := cfg.Host
	if len(host) > 0 && host[0] == '/' {
		return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", cfg.User, name, host, cfg.Port), nil
	}
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, host, cfg.Port, name), nil
}

func adminExec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("error connecting to the test server (%s): %w", "TEST_DATABASE_URL", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

func dropDatabase(ctx context.Context, name string) error {
	return adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func migrationsHash() (string, error) {
	ms, err := migrate.Migrations()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range ms {
		io.WriteString(h, m.Version)
		io.WriteString(h, m.SQL)
	}
	// River's own migrations change with its version.
	io.WriteString(h, riverVersion())
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Template returns the name of the migrated template database, building it
// on first use.
func Template() (string, error) {
	templateOnce.Do(func() { templateName, templateErr = buildTemplate(context.Background()) })
	return templateName, templateErr
}

func buildTemplate(ctx context.Context) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "mailwatch_tmpl_" + sum
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return "", fmt.Errorf("error connecting to the test server (is Postgres running? scripts/test starts one): %w", err)
	}
	defer conn.Close(ctx)
	// Serialise template builds across the test processes of one run.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7366001043)"); err != nil {
		return "", err
	}
	defer func() { _, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock(7366001043)") }()

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", fmt.Errorf("error creating template database: %w", err)
	}
	url, err := URLFor(building)
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return "", err
	}
	_, err = migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("error migrating template database: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("error renaming template database: %w", err)
	}
	return name, nil
}

func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createClone creates a new database from the template and returns its name.
func createClone(ctx context.Context) (string, error) {
	tmpl, err := Template()
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s%d_%s", Prefix, os.Getpid(), randomSuffix())
	// Cloning fails while anyone is connected to the template, which only
	// happens for an instant while another process checks it; retry briefly.
	for attempt := 0; ; attempt++ {
		err = adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize())
		if err == nil || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return "", fmt.Errorf("error cloning template database: %w", err)
	}
	return name, nil
}

func sharedDB() (*pgxpool.Pool, error) {
	sharedOnce.Do(func() {
		ctx := context.Background()
		sharedName, sharedErr = createClone(ctx)
		if sharedErr != nil {
			return
		}
		url, err := URLFor(sharedName)
		if err != nil {
			sharedErr = err
			return
		}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			sharedErr = err
			return
		}
		cfg.MaxConns = 32
		cfg.AfterConnect = dbutil.AfterConnect
		sharedPool, sharedErr = pgxpool.NewWithConfig(ctx, cfg)
	})
	return sharedPool, sharedErr
}

// Tx returns a transaction on the process's shared test database that is
// rolled back when the test ends.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	pool, err := sharedDB()
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("error beginning test transaction: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	return tx
}

// NewDB returns a pool on a fresh migrated database of the test's own and
// the URL to reach it (for subprocesses), dropped when the test ends.
func NewDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	name, err := createClone(ctx)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	url, err := URLFor(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	cfg.AfterConnect = dbutil.AfterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		if err := dropDatabase(context.Background(), name); err != nil {
			t.Logf("error dropping test database %s: %v", name, err)
		}
	})
	return pool, url
}
