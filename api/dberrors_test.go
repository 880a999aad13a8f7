package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// lockedBuffer is a log sink safe for the watch goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDatabaseUnavailableRecognisesRealConnectionFailures classifies errors
// produced by a real Postgres and a real refused port: lost and refused
// connections are "unavailable"; a query's own failure is not.
func TestDatabaseUnavailableRecognisesRealConnectionFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = pgx.Connect(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, DatabaseUnavailable(err), "refused: %v", err)
	require.True(t, DatabaseUnavailable(fmt.Errorf("error loading key: %w", err)), "wrapped")

	// A backend terminated under a connection, as in a restart.
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	var one int
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	require.Error(t, err)
	require.True(t, DatabaseUnavailable(err), "terminated: %v", err)
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	require.True(t, DatabaseUnavailable(err), "closed after termination: %v", err)

	// Errors of the query itself are not outages.
	_, err = pool.Exec(ctx, "SELECT * FROM no_such_table")
	require.Error(t, err)
	require.False(t, DatabaseUnavailable(err), "%v", err)
	require.False(t, DatabaseUnavailable(pgx.ErrNoRows))
	require.False(t, DatabaseUnavailable(errors.New("boom")))
	require.False(t, DatabaseUnavailable(nil))
}

// TestOutageAnswers503AndLogsOnce: during an outage every request whose
// handler lost the database gets 503 with Retry-After and a detail; the
// outage is logged once at warn and the recovery once at info; other errors
// keep their status.
func TestOutageAnswers503AndLogsOnce(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	var dbUp atomic.Bool
	lost := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	o := newOutageLog(logger, func(context.Context) error {
		if dbUp.Load() {
			return nil
		}
		return lost
	})
	o.every = 10 * time.Millisecond
	app := fiber.New(fiber.Config{ErrorHandler: o.handler(errorHandler(logger))})
	app.Get("/lost", func(*fiber.Ctx) error { return fmt.Errorf("error reading key: %w", lost) })
	app.Get("/lost500", func(*fiber.Ctx) error { return &Error{Status: 500, Detail: "x", Cause: lost} })
	app.Get("/bug", func(*fiber.Ctx) error { return errors.New("nil map") })
	app.Get("/otherdial", func(*fiber.Ctx) error { return fmt.Errorf("error fetching JWKS: %w", lost) })
	app.Get("/notfound", func(*fiber.Ctx) error { return NotFound("domain") })

	get := func(path string) (int, string, string) {
		resp, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var eb ErrorBody
		require.NoError(t, json.Unmarshal(body, &eb), "%s", body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), eb.Detail
	}
	dbUp.Store(true)
	status, _, _ := get("/otherdial")
	require.Equal(t, 500, status, "a failed dial elsewhere, with the database up, is not an outage")
	dbUp.Store(false)
	for range 50 {
		status, retry, detail := get("/lost")
		require.Equal(t, 503, status)
		require.Equal(t, "5", retry)
		require.Equal(t, "the database is unavailable; try again shortly", detail)
		status, retry, _ = get("/lost500")
		require.Equal(t, 503, status)
		require.Equal(t, "5", retry)
	}
	status, _, _ = get("/bug")
	require.Equal(t, 500, status, "a bug stays a 500")
	status, _, _ = get("/notfound")
	require.Equal(t, 404, status)

	require.Equal(t, 1, strings.Count(logs.String(), "database unavailable"), logs.String())
	require.NotContains(t, logs.String(), "database reachable again")
	dbUp.Store(true)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "database reachable again") },
		5*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), `"requests_refused":100`)
	require.Equal(t, 1, strings.Count(logs.String(), `"level":"WARN"`), "one warn line for 100 refused requests")

	// A second outage is logged again.
	dbUp.Store(false)
	status, _, _ = get("/lost")
	require.Equal(t, 503, status)
	require.Equal(t, 2, strings.Count(logs.String(), "database unavailable"))
}

// TestSlowDatabaseAnswers503: a statement cut by DB_STATEMENT_TIMEOUT (the
// client-side bound, or the server's statement_timeout) is a 503 with
// Retry-After whose detail names the database; with the database answering
// pings it is a slow statement (a warn line), not an outage; with pings
// failing too (a frozen server) it is the outage, logged once.
func TestSlowDatabaseAnswers503(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	var dbUp atomic.Bool
	o := newOutageLog(logger, func(ctx context.Context) error {
		if dbUp.Load() {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	o.every = 10 * time.Millisecond
	app := fiber.New(fiber.Config{ErrorHandler: o.handler(errorHandler(logger))})
	cut := &dbutil.StatementTimeoutError{Timeout: 6 * time.Second, Err: fmt.Errorf("timeout: %w", context.DeadlineExceeded)}
	app.Get("/cut", func(*fiber.Ctx) error { return fmt.Errorf("error loading domain: %w", cut) })
	app.Get("/cancelled", func(*fiber.Ctx) error {
		return &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
	})
	get := func(path string) (int, string, string) {
		resp, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var eb ErrorBody
		require.NoError(t, json.Unmarshal(body, &eb), "%s", body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), eb.Detail
	}
	dbUp.Store(true)
	for _, path := range []string{"/cut", "/cancelled"} {
		status, retry, detail := get(path)
		require.Equal(t, 503, status, path)
		require.Equal(t, "5", retry, path)
		require.Equal(t, "the database did not answer in time; try again shortly", detail, path)
	}
	require.Equal(t, 2, strings.Count(logs.String(), "database statement cut by DB_STATEMENT_TIMEOUT"), logs.String())
	require.NotContains(t, logs.String(), "database unavailable")

	dbUp.Store(false) // frozen: the ping gets no answer either
	for range 3 {
		status, _, _ := get("/cut")
		require.Equal(t, 503, status)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "database unavailable"), logs.String())
	dbUp.Store(true)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "database reachable again") },
		5*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), `"requests_refused":3`)
}
