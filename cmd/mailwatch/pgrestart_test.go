package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/jobs"
)

// ownPostgres is a throwaway Postgres cluster of the test's own, so that
// the test can restart it (the shared test server must not be touched).
type ownPostgres struct {
	bin, data, url string
	cred           *syscall.Credential
}

func startOwnPostgres(t *testing.T) *ownPostgres {
	t.Helper()
	bindirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(bindirs)
	if len(bindirs) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			bindirs = []string{filepath.Dir(p)}
		}
	}
	if len(bindirs) == 0 {
		t.Skip("no PostgreSQL server binaries (initdb) on this machine: the restart test needs a cluster of its own")
	}
	pg := &ownPostgres{bin: bindirs[len(bindirs)-1]}
	dir, err := os.MkdirTemp("", "mailwatch-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 { // Postgres refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: cannot start a private cluster")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	pg.data = filepath.Join(dir, "data")
	port := strings.Split(freeAddr(t), ":")[1]
	pg.run(t, "initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
	conf := fmt.Sprintf("port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 100\n", port, dir)
	f, err := os.OpenFile(filepath.Join(pg.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	pg.start(t)
	t.Cleanup(func() { _ = pg.cmd("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").Run() })
	pg.url = "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	return pg
}

func (pg *ownPostgres) start(t *testing.T) {
	t.Helper()
	pg.run(t, "pg_ctl", "-D", pg.data, "-l", filepath.Join(filepath.Dir(pg.data), "log"), "-w", "start")
}

func (pg *ownPostgres) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(pg.bin, name), args...)
	if pg.cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	c.Dir = os.TempDir()
	return c
}

func (pg *ownPostgres) run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := pg.cmd(name, args...).CombinedOutput()
	require.NoError(t, err, "%s: %s", name, out)
}

// TestFleetSurvivesPostgresRestart restarts a real Postgres (immediate
// shutdown, as a crash or failover does, down for 3 s) under load: an API
// and a worker recover without a 500 (503 with Retry-After meanwhile),
// every event committed before, during and after is delivered, the API
// logs the outage and the recovery once, and the worker's /readyz reports
// ready again.
func TestFleetSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := startOwnPostgres(t)
	ctx := context.Background()
	migrate := exec.Command(buildBinary(t), "migrate")
	migrate.Env = baseEnv(pg.url)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "%s", out)

	var (
		recvMu   sync.Mutex
		received = map[string]int{}
	)
	rcvLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rcv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		recvMu.Lock()
		received[r.Header.Get("webhook-id")]++
		recvMu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = rcv.Serve(rcvLn) }()
	t.Cleanup(func() { _ = rcv.Close() })

	env := append(baseEnv(pg.url), "WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32,::1/128", "LOG_LEVEL=info", "DB_MAX_CONNS=8")
	apiAddr, workerOps := freeAddr(t), freeAddr(t)
	apiP := startProcess(t, append(append([]string{}, env...), "LISTEN_ADDR="+apiAddr), "api")
	workerP := startProcess(t, append(append([]string{}, env...), "METRICS_ADDR="+workerOps), "worker")
	waitHTTP(t, "http://"+apiAddr+"/readyz")
	waitHTTP(t, "http://"+workerOps+"/readyz")

	c := fleetClient{t}
	var acct struct {
		Account struct {
			ID uuid.UUID `json:"id"`
		} `json:"account"`
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	c.json("POST", "http://"+apiAddr+"/api/accounts", "", map[string]string{"email": "restart@example.com", "password": "a long restart password"}, 201, &acct)
	c.json("POST", "http://"+apiAddr+"/api/accounts/me/event-subscriptions", acct.APIKey.Key,
		map[string]any{"url": "http://" + rcvLn.Addr().String() + "/hook"}, 201, nil)

	pool, err := dbutil.NewPool(ctx, pg.url, 4)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	riverClient, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	// One event per transaction, as the API emits; a failed commit (the
	// server is down) is not counted and is tried again, as a client would.
	var emitted atomic.Int64
	emitOne := func() error {
		return dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
			_, err := (&events.Emitter{River: riverClient}).Emit(ctx, tx, events.Event{
				AccountID: acct.Account.ID, Type: events.TypeReceiverMessageReceived,
				Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"},
			})
			return err
		})
	}
	stop := make(chan struct{})
	var loadWG sync.WaitGroup
	statuses := map[int]int{}
	var bad []string
	var mu sync.Mutex
	loadWG.Add(2)
	go func() { // emitter
		defer loadWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if emitOne() == nil {
				emitted.Add(1)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	go func() { // API reads with the (cached) key
		defer loadWG.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, body := c.do("GET", "http://"+apiAddr+"/api/accounts/me/dashboard-summary", acct.APIKey.Key, nil)
			mu.Lock()
			statuses[resp.StatusCode]++
			if resp.StatusCode >= 500 && (resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"detail"`)) {
				bad = append(bad, fmt.Sprintf("%d %s", resp.StatusCode, body))
			}
			mu.Unlock()
		}
	}()

	time.Sleep(2 * time.Second)
	pg.run(t, "pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop")
	t.Log("postgres stopped (immediate)")
	time.Sleep(3 * time.Second)
	pg.start(t)
	t.Log("postgres started")
	time.Sleep(3 * time.Second)
	close(stop)
	loadWG.Wait()

	// A commit cut by the stop may have landed without its answer: such an
	// event is not counted but must be delivered all the same.
	total := int(emitted.Load())
	require.Positive(t, total)
	var rows int
	require.Eventually(t, func() bool {
		var pending int
		if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status <> 'delivered') FROM webhook_deliveries").Scan(&rows, &pending); err != nil {
			return false
		}
		return rows >= total && pending == 0
	}, 90*time.Second, 200*time.Millisecond, "not every committed event was delivered; worker:\n%s", workerP.log())
	require.LessOrEqual(t, rows, total+1, "at most the one commit in flight at the stop is unacknowledged")
	idRows, err := pool.Query(ctx, "SELECT id::text FROM webhook_deliveries")
	require.NoError(t, err)
	ids, err := pgx.CollectRows(idRows, pgx.RowTo[string])
	require.NoError(t, err)
	recvMu.Lock()
	for _, id := range ids {
		require.Positive(t, received[id], "delivery %s arrived", id)
	}
	require.Len(t, received, rows, "no push with an unknown webhook-id")
	recvMu.Unlock()
	waitHTTP(t, "http://"+workerOps+"/readyz")

	mu.Lock()
	t.Logf("restart: %d events committed and delivered (%d rows); API reads: %v", total, rows, statuses)
	require.Empty(t, bad, "no 500; every 503 has Retry-After and a detail")
	require.Positive(t, statuses[http.StatusServiceUnavailable], "the API saw the outage")
	mu.Unlock()
	log := apiP.log()
	require.Equal(t, 1, strings.Count(log, "database unavailable"), "the outage is logged once:\n%s", log)
	require.Eventually(t, func() bool { return strings.Count(apiP.log(), "database reachable again") == 1 }, 10*time.Second, 50*time.Millisecond, apiP.log())
	require.NotContains(t, log, `"status":500`)
	// River's retry loops log each failure once per 30 s, not every 200 ms.
	wlog := workerP.log()
	errLines := strings.Count(wlog, `"level":"ERROR"`) + strings.Count(wlog, `"level":"WARN"`)
	t.Logf("worker: %d warn/error lines for the outage", errLines)
	require.Less(t, errLines, 30, "the outage is not logged line by line:\n%s", wlog)
}
