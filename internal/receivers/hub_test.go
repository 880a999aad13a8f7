package receivers_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

// waitTimeout bounds every wait for something asynchronous (a wake-up, a
// reconnection), so that a broken hub fails the test instead of hanging it.
const waitTimeout = 10 * time.Second

func requireWoken(t *testing.T, w *receivers.Waiter, msgAndArgs ...any) {
	t.Helper()
	select {
	case <-w.C:
	case <-time.After(waitTimeout):
		require.FailNow(t, "waiter was not woken within "+waitTimeout.String(), msgAndArgs...)
	}
}

// requireNotWoken checks that no wake-up is pending right now; callers make
// sure that whatever could have woken the waiter has already happened.
func requireNotWoken(t *testing.T, w *receivers.Waiter, msgAndArgs ...any) {
	t.Helper()
	select {
	case <-w.C:
		require.FailNow(t, "waiter was woken", msgAndArgs...)
	default:
	}
}

func requireClosed(t *testing.T, c <-chan struct{}, msgAndArgs ...any) {
	t.Helper()
	select {
	case <-c:
	default:
		require.FailNow(t, "channel is not closed", msgAndArgs...)
	}
}

func requireOpen(t *testing.T, c <-chan struct{}, msgAndArgs ...any) {
	t.Helper()
	select {
	case <-c:
		require.FailNow(t, "channel is closed", msgAndArgs...)
	default:
	}
}

func register(t *testing.T, hub *receivers.Hub, id uuid.UUID) *receivers.Waiter {
	t.Helper()
	w, err := hub.Register(id)
	require.NoError(t, err)
	require.NotNil(t, w)
	t.Cleanup(func() {
		// Bounded: a hub stuck holding its lock must fail the test, not hang it.
		done := make(chan struct{})
		go func() { defer close(done); w.Close() }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("Waiter.Close blocked")
		}
	})
	return w
}

// runHub runs hub.Run in the background; stop cancels it and returns Run's
// result (also done at cleanup).
func runHub(t *testing.T, hub *receivers.Hub) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- hub.Run(ctx) }()
	var (
		once   sync.Once
		runErr error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(waitTimeout):
				runErr = errors.New("Run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

func requireReady(t *testing.T, hub *receivers.Hub) {
	t.Helper()
	select {
	case <-hub.Ready():
	case <-time.After(waitTimeout):
		require.FailNow(t, "hub never became ready")
	}
}

// listenerPIDs returns the backends of this database whose application_name
// marks them as a hub's LISTEN connection.
func listenerPIDs(t *testing.T, pool *pgxpool.Pool) []int32 {
	t.Helper()
	pids, err := queryListenerPIDs(pool)
	require.NoError(t, err)
	return pids
}

// queryListenerPIDs is listenerPIDs for require.Eventually conditions, which
// run on another goroutine and must not call FailNow.
func queryListenerPIDs(pool *pgxpool.Pool) ([]int32, error) {
	rows, err := pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%-listener' ORDER BY pid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

func notify(t *testing.T, pool *pgxpool.Pool, payload string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "SELECT pg_notify($1, $2)", receivers.NotifyChannel, payload)
	require.NoError(t, err)
}

// logBuffer collects a logger's output; safe for the hub's goroutine and the
// test to use at once.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestHubWakeWakesOnlyThatReceiversWaiters(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	a, b := uuid.New(), uuid.New()
	a1, a2, b1 := register(t, hub, a), register(t, hub, a), register(t, hub, b)
	require.Equal(t, 3, hub.Len())

	hub.Wake(a)
	requireWoken(t, a1)
	requireWoken(t, a2, "every waiter of the receiver is woken")
	requireNotWoken(t, b1, "another receiver's waiter stays asleep")

	hub.Wake(uuid.New()) // nobody waits for it: a no-op
	requireNotWoken(t, a1)
	requireNotWoken(t, b1)

	hub.Wake(a, b)
	requireWoken(t, a1)
	requireWoken(t, a2)
	requireWoken(t, b1)
}

func TestHubWakeUpsCoalesce(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	id := uuid.New()
	w := register(t, hub, id)

	// Nobody reads while the receiver is woken many times: Wake must not
	// block (it holds the hub's lock), and the wake-ups merge into one.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			hub.Wake(id)
		}
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		require.FailNow(t, "Wake blocked on a waiter that already had a pending wake-up")
	}
	require.Equal(t, 1, cap(w.C))
	requireWoken(t, w)
	requireNotWoken(t, w, "five wake-ups before a read are one")

	// Once read, the next wake-up is delivered again.
	hub.Wake(id)
	requireWoken(t, w)
}

func TestWaiterCloseUnregisters(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	id := uuid.New()
	w1, err := hub.Register(id)
	require.NoError(t, err)
	w2, err := hub.Register(id)
	require.NoError(t, err)
	require.Equal(t, 2, hub.Len())

	w1.Close()
	require.Equal(t, 1, hub.Len())
	w1.Close() // idempotent: must not unregister w2's count
	require.Equal(t, 1, hub.Len())

	hub.Wake(id)
	requireNotWoken(t, w1, "a closed waiter is no longer woken")
	requireWoken(t, w2, "closing one waiter leaves the receiver's others registered")

	w2.Close()
	require.Zero(t, hub.Len())
	w2.Close()
	require.Zero(t, hub.Len())

	// The receiver can be waited for again after its last waiter left.
	w3 := register(t, hub, id)
	require.Equal(t, 1, hub.Len())
	hub.Wake(id)
	requireWoken(t, w3)
}

func TestHubCloseRefusesRegister(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	id := uuid.New()
	w := register(t, hub, id)
	requireOpen(t, hub.Done())

	hub.Close()
	requireClosed(t, hub.Done(), "Done is closed so that waits end")
	hub.Close() // idempotent: closing the done channel twice would panic

	w2, err := hub.Register(uuid.New())
	require.ErrorIs(t, err, receivers.ErrHubClosed)
	require.Nil(t, w2)
	require.Equal(t, 1, hub.Len(), "a refused Register does not count")

	// Waiters registered before the close can still leave.
	w.Close()
	require.Zero(t, hub.Len())
}

func TestHubWakeLocal(t *testing.T) {
	t.Parallel()
	id := uuid.New()

	local := receivers.NewHub(nil, nil)
	require.False(t, local.Listening())
	lw := register(t, local, id)
	local.WakeLocal(id)
	requireWoken(t, lw, "a hub without a listener is woken in-process")

	// A listening hub is woken by the database; WakeLocal must not wake its
	// waiters a second time. (Run is never called: no connection is made.)
	listening := receivers.NewHub(receivers.ConnectURL("postgres://unused.invalid/db"), nil)
	require.True(t, listening.Listening())
	w := register(t, listening, id)
	listening.WakeLocal(id)
	requireNotWoken(t, w, "WakeLocal is a no-op on a listening hub")
	listening.Wake(id)
	requireWoken(t, w, "Wake still works on a listening hub")
}

func TestHubRunWithoutConnector(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	stop := runHub(t, hub)
	w := register(t, hub, uuid.New())
	requireOpen(t, hub.Done(), "the hub runs until its context ends")
	require.NoError(t, stop())
	requireClosed(t, hub.Done())
	requireNotWoken(t, w)
	_, err := hub.Register(uuid.New())
	require.ErrorIs(t, err, receivers.ErrHubClosed)
}

func TestConnectURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewDB(t)
	require.True(t, strings.Contains(url, "?"), "dbtest URLs carry a query: %s", url)

	appName := func(connect receivers.Connector) string {
		t.Helper()
		conn, err := connect(ctx)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var name string
		require.NoError(t, conn.QueryRow(ctx, "SHOW application_name").Scan(&name))
		return name
	}
	require.Equal(t, "mailwatch-listener", appName(receivers.ConnectURL(url)))
	require.Equal(t, "qa-listener", appName(receivers.ConnectURL(url+"&application_name=qa")))

	_, err := receivers.ConnectURL("postgres://%zz")(ctx)
	require.ErrorContains(t, err, "error parsing database URL")
}

func TestHubListenWakesNotifiedReceiver(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	hub := receivers.NewHub(receivers.ConnectURL(url), nil)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	// Registered before the first connection: LISTEN wakes everyone once,
	// since anything sent before it was missed.
	wa, wb, wc := register(t, hub, a), register(t, hub, b), register(t, hub, c)
	requireOpen(t, hub.Ready())
	runHub(t, hub)
	requireReady(t, hub)
	for _, w := range []*receivers.Waiter{wa, wb, wc} {
		requireWoken(t, w, "the first LISTEN wakes waiters registered before it")
	}
	require.Len(t, listenerPIDs(t, pool), 1, "one dedicated LISTEN connection")

	notify(t, pool, a.String())
	requireWoken(t, wa)
	// Notifications are handled in order: once c's is seen, a's has been
	// fully handled, so b would already have been woken by mistake.
	notify(t, pool, c.String())
	requireWoken(t, wc)
	requireNotWoken(t, wb, "a notification wakes only its receiver's waiters")
	requireNotWoken(t, wa)

	// A waiter registered while listening is reached too.
	late := register(t, hub, b)
	notify(t, pool, b.String())
	requireWoken(t, late)
	requireWoken(t, wb)
}

func TestHubIgnoresMalformedNotification(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	var logs logBuffer
	hub := receivers.NewHub(receivers.ConnectURL(url), newLogger(&logs))
	a, b := uuid.New(), uuid.New()
	wa, wb := register(t, hub, a), register(t, hub, b)
	runHub(t, hub)
	requireReady(t, hub)
	requireWoken(t, wa)
	requireWoken(t, wb)
	before := listenerPIDs(t, pool)
	require.Len(t, before, 1)

	notify(t, pool, "not-a-uuid")
	notify(t, pool, "")
	notify(t, pool, a.String())
	requireWoken(t, wa, "the hub keeps listening after a malformed payload")
	requireNotWoken(t, wb, "a malformed payload wakes nobody (and did not force a reconnection)")
	require.Equal(t, before, listenerPIDs(t, pool), "the same LISTEN connection is still in use")
	require.Contains(t, logs.String(), "ignoring malformed receiver notification")
	require.Contains(t, logs.String(), "payload=not-a-uuid")
	require.NotContains(t, logs.String(), "reconnecting")
}

func TestHubReconnectsAndWakesEveryone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)
	var logs logBuffer
	hub := receivers.NewHub(receivers.ConnectURL(url), newLogger(&logs))
	a, b := uuid.New(), uuid.New()
	wa1, wa2, wb := register(t, hub, a), register(t, hub, a), register(t, hub, b)
	all := []*receivers.Waiter{wa1, wa2, wb}
	runHub(t, hub)
	requireReady(t, hub)
	for _, w := range all {
		requireWoken(t, w)
	}
	old := listenerPIDs(t, pool)
	require.Len(t, old, 1)
	for _, w := range all {
		requireNotWoken(t, w, "nothing is pending before the connection is killed")
	}

	var killed bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", old[0]).Scan(&killed))
	require.True(t, killed)

	// Notifications sent while nobody listened are lost, so after the
	// reconnection every waiter must re-check.
	for _, w := range all {
		requireWoken(t, w, "every waiter is woken after the reconnection")
	}
	require.Eventually(t, func() bool {
		pids, err := queryListenerPIDs(pool)
		return err == nil && len(pids) == 1 && pids[0] != old[0]
	}, waitTimeout, 20*time.Millisecond, "a new LISTEN connection replaces the killed one")
	require.Contains(t, logs.String(), "receiver LISTEN connection lost; reconnecting")

	// The new connection listens.
	notify(t, pool, b.String())
	requireWoken(t, wb, "a NOTIFY after the reconnection is delivered")
	requireNotWoken(t, wa1)
	requireNotWoken(t, wa2)
}

func TestHubRunRetriesFailedConnect(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	var (
		calls atomic.Int32
		logs  logBuffer
	)
	connect := func(ctx context.Context) (*pgx.Conn, error) {
		if calls.Add(1) <= 2 {
			return nil, errors.New("test: server not up yet")
		}
		return receivers.ConnectURL(url)(ctx)
	}
	hub := receivers.NewHub(connect, newLogger(&logs))
	runHub(t, hub)
	requireReady(t, hub)
	require.Equal(t, int32(3), calls.Load(), "two failures, then the connection that is ready")
	require.Equal(t, 2, strings.Count(logs.String(), "test: server not up yet"), "each failure is logged")

	id := uuid.New()
	w := register(t, hub, id)
	notify(t, pool, id.String())
	requireWoken(t, w)
}

func TestHubRunCancelWhileConnectFails(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	hub := receivers.NewHub(func(context.Context) (*pgx.Conn, error) {
		calls.Add(1)
		return nil, errors.New("test: unreachable")
	}, nil)
	stop := runHub(t, hub)
	require.Eventually(t, func() bool { return calls.Load() >= 2 }, waitTimeout, 10*time.Millisecond,
		"a failed connect is retried")
	require.NoError(t, stop(), "cancelling ends Run even while it backs off")
	requireClosed(t, hub.Done())
	requireOpen(t, hub.Ready(), "the hub never listened")
}

func TestHubRunCancelClosesHub(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	hub := receivers.NewHub(receivers.ConnectURL(url), nil)
	stop := runHub(t, hub)
	requireReady(t, hub)
	w, err := hub.Register(uuid.New())
	require.NoError(t, err)
	require.Len(t, listenerPIDs(t, pool), 1)
	requireOpen(t, hub.Done())

	require.NoError(t, stop())
	requireClosed(t, hub.Done(), "Run closes the hub when its context ends")
	_, err = hub.Register(uuid.New())
	require.ErrorIs(t, err, receivers.ErrHubClosed)
	require.Eventually(t, func() bool {
		pids, err := queryListenerPIDs(pool)
		return err == nil && len(pids) == 0
	}, waitTimeout, 20*time.Millisecond,
		"the LISTEN connection is closed")
	w.Close()
	require.Zero(t, hub.Len())
}
