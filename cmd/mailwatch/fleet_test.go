package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/jobs"
)

// fleetClient speaks JSON to the API replicas.
type fleetClient struct {
	t *testing.T
}

func (c fleetClient) do(method, url, key string, body any) (*http.Response, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp, out
}

func (c fleetClient) json(method, url, key string, body any, want int, into any) {
	c.t.Helper()
	resp, out := c.do(method, url, key, body)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: %s", method, url, out)
	if into != nil {
		require.NoError(c.t, json.Unmarshal(out, into), "%s", out)
	}
}

// TestFleet runs the fleet an operator runs, from the built binary on
// loopback: 2 API, 2 workers and 1 SMTP listener on a Postgres cluster of
// the test's own and one Redis. Under a mixed load (events emitted, mail
// over SMTP, long-poll waits on the other API replica, API reads) it kills
// one worker with SIGKILL and then restarts Postgres (an immediate
// shutdown, as a crash or failover does, down for outageFor) while events
// are still being committed, and checks: the rate limit is shared exactly;
// no delivery is lost, including those committed around the restart
// (duplicates are counted and reported); waits are woken across replicas;
// no request answers 500 (503 with Retry-After during the outage) and mail
// is refused with 4xx, then stored once; every process logs the outage
// once at warn and the recovery once at info, the worker's River retry
// loops only a few lines; the surviving worker is ready again; every live
// process's /metrics answers 200 throughout.
func TestFleet(t *testing.T) {
	t.Parallel()
	redisURL := os.Getenv("TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("TEST_REDIS_URL is unset (scripts/test always sets it): the fleet shares rate limits through Redis")
	}
	pg := startOwnPostgres(t)
	migrate := exec.Command(buildBinary(t), "migrate")
	migrate.Env = baseEnv(pg.url)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx := context.Background()
	pool, err := dbutil.NewPool(ctx, pg.url, 8)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	runFleet(t, pg, pool, redisURL)
}

// outageFor is how long TestFleet's Postgres stays down: longer than a
// worker's readiness bound (jobs.UnreadyAfter), so that every process,
// workers included, goes through its outage and recovery.
const outageFor = 11 * time.Second

func runFleet(t *testing.T, pg *ownPostgres, pool *pgxpool.Pool, redisURL string) {
	ctx := context.Background()

	// The subscriber: slow enough that pushes are in flight when a worker dies.
	var (
		recvMu   sync.Mutex
		received = map[string]int{} // webhook-id -> arrivals
	)
	rcvLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rcvAddr := rcvLn.Addr().String()
	rcv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond)
		recvMu.Lock()
		received[r.Header.Get("webhook-id")]++
		recvMu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = rcv.Serve(rcvLn) }()
	t.Cleanup(func() { _ = rcv.Close() })
	uniqueReceived := func() int {
		recvMu.Lock()
		defer recvMu.Unlock()
		return len(received)
	}

	common := append(baseEnv(pg.url),
		"REDIS_URL="+redisURL,
		"WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32,::1/128",
		"JOB_RESCUE_AFTER=5s",
		"RATE_LIMIT_PER_MINUTE=100",
		"DB_MAX_CONNS=8",
		"LOG_LEVEL=info",
		"INBOUND_DOMAIN=fleet.test",
	)
	type member struct {
		name, http string
		p          *process
	}
	var fleet []*member
	start := func(name, role string, env ...string) *member {
		m := &member{name: name}
		addr := freeAddr(t)
		if role == "api" {
			env = append(env, "LISTEN_ADDR="+addr)
		} else {
			env = append(env, "METRICS_ADDR="+addr)
		}
		m.http = "http://" + addr
		m.p = startProcess(t, append(append([]string{}, common...), env...), role)
		fleet = append(fleet, m)
		return m
	}
	smtpAddr := freeAddr(t)
	api1, api2 := start("api-1", "api"), start("api-2", "api")
	w1, w2 := start("worker-1", "worker"), start("worker-2", "worker")
	smtpM := start("smtp", "smtp", "SMTP_ADDR="+smtpAddr)
	for _, m := range fleet {
		waitHTTP(t, m.http+"/readyz")
	}

	// /metrics of every live process, scraped throughout.
	var (
		killed      atomic.Pointer[member]
		scrapes     atomic.Int64
		scrapeFails []string
		scrapeMu    sync.Mutex
		stopScrape  = make(chan struct{})
		scrapeDone  = make(chan struct{})
	)
	go func() {
		defer close(scrapeDone)
		for {
			select {
			case <-stopScrape:
				return
			case <-time.After(250 * time.Millisecond):
			}
			for _, m := range fleet {
				if killed.Load() == m {
					continue
				}
				resp, err := http.Get(m.http + "/metrics")
				scrapes.Add(1)
				if killed.Load() == m {
					continue
				}
				scrapeMu.Lock()
				if err != nil {
					scrapeFails = append(scrapeFails, m.name+": "+err.Error())
				} else {
					if resp.StatusCode != http.StatusOK {
						body, _ := io.ReadAll(resp.Body)
						scrapeFails = append(scrapeFails, fmt.Sprintf("%s: %d %s", m.name, resp.StatusCode, body))
					}
					resp.Body.Close()
				}
				scrapeMu.Unlock()
			}
		}
	}()

	c := fleetClient{t}
	var acct struct {
		Account struct {
			ID uuid.UUID `json:"id"`
		} `json:"account"`
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	c.json("POST", api1.http+"/api/accounts", "", map[string]string{"email": "fleet@example.com", "password": "a long fleet password"}, 201, &acct)
	key := acct.APIKey.Key
	newKey := func(label string) string {
		var k struct {
			Key string `json:"key"`
		}
		c.json("POST", api2.http+"/api/accounts/me/api-keys", key, map[string]string{"label": label}, 201, &k)
		return k.Key
	}
	rlKey, probeKey := newKey("ratelimit"), newKey("probe")
	c.json("POST", api2.http+"/api/accounts/me/event-subscriptions", key, map[string]any{"url": "http://" + rcvAddr + "/hook"}, 201, nil)

	// Shared rate limit: 100 requests alternating replicas count 99..0, the
	// 101st is refused, whichever replica answers.
	for i := range 101 {
		base := api1.http
		if i%2 == 1 {
			base = api2.http
		}
		resp, body := c.do("GET", base+"/api/accounts/me", rlKey, nil)
		if i < 100 {
			require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i+1, body)
			require.Equal(t, strconv.Itoa(99-i), resp.Header.Get("X-RateLimit-Remaining"), "request %d", i+1)
		} else {
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "request 101 on %s: %s", base, body)
		}
	}

	// Events as the API emits them, 100 per transaction.
	riverClient, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	emit := func(n int) error {
		for done := 0; done < n; done += 100 {
			if err := dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
				for range min(100, n-done) {
					if _, err := (&events.Emitter{River: riverClient}).Emit(ctx, tx, events.Event{
						AccountID: acct.Account.ID, Type: events.TypeReceiverMessageReceived,
						Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"},
					}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}

	// Receivers made on one replica, waited on at the other, fed by SMTP.
	mailRound := func(n int) {
		type rcvr struct {
			ID      uuid.UUID `json:"id"`
			Address string    `json:"address"`
		}
		var wg sync.WaitGroup
		results := make([]int, n)
		for i := range n {
			var r rcvr
			c.json("POST", api1.http+"/api/accounts/me/receivers", key, map[string]any{"label": fmt.Sprint("r", i)}, 201, &r)
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("GET", api2.http+"/api/accounts/me/receivers/"+r.ID.String()+"/wait?timeout=30", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				results[i] = resp.StatusCode
			}()
			time.Sleep(20 * time.Millisecond) // the wait registers before the mail
			msg := fmt.Sprintf("From: qa@example.com\r\nTo: %s\r\nSubject: fleet %d\r\n\r\nhello\r\n", r.Address, i)
			require.NoError(t, smtp.SendMail(smtpAddr, nil, "qa@example.com", []string{r.Address}, []byte(msg)))
		}
		wg.Wait()
		for i, code := range results {
			require.Equal(t, http.StatusOK, code, "wait %d on the other replica was not woken by its message", i)
		}
	}

	const before, after = 1500, 500
	emitDone := make(chan error, 1)
	go func() { emitDone <- emit(before) }()
	mailRound(10) // 10 more events (receiver_message_received) to deliver
	require.NoError(t, <-emitDone)
	require.Eventually(t, func() bool { return uniqueReceived() >= 300 }, 60*time.Second, 10*time.Millisecond)
	running := 0
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'running'").Scan(&running))
	killed.Store(w1)
	require.NoError(t, w1.p.cmd.Process.Signal(syscall.SIGKILL))
	t.Logf("killed worker-1 with %d deliveries received, %d jobs running", uniqueReceived(), running)

	// Postgres restarts under load: authenticated reads on both replicas
	// and events committed one per transaction, as the API emits them (a
	// failed commit is not counted and is tried again, as a client would).
	var probeStatuses sync.Map // status -> count
	var probe500 []string
	var probeMu sync.Mutex
	probeStop := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for i := 0; ; i++ {
			select {
			case <-probeStop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			base := []string{api1.http, api2.http}[i%2]
			resp, body := c.do("GET", base+"/api/accounts/me", probeKey, nil)
			v, _ := probeStatuses.LoadOrStore(resp.StatusCode, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			if resp.StatusCode >= 500 && (resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"detail"`)) {
				probeMu.Lock()
				probe500 = append(probe500, fmt.Sprintf("%s %d %s", base, resp.StatusCode, body))
				probeMu.Unlock()
			}
		}
	}()
	var outRcv struct {
		ID      uuid.UUID `json:"id"`
		Address string    `json:"address"`
	}
	c.json("POST", api1.http+"/api/accounts/me/receivers", key, map[string]any{"label": "outage"}, 201, &outRcv)
	outMsg := []byte("From: qa@example.com\r\nTo: " + outRcv.Address + "\r\nSubject: during the outage\r\n\r\nhello\r\n")
	var duringOutage atomic.Int64
	emitStop, emitStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(emitStopped)
		for {
			select {
			case <-emitStop:
				return
			default:
			}
			if emit(1) == nil {
				duringOutage.Add(1)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	pg.run(t, "pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop")
	stopped := time.Now()
	t.Log("postgres stopped (immediate)")
	time.Sleep(time.Second)
	// SMTP refuses for now (4xx), so the sending MTA retries later.
	err = smtp.SendMail(smtpAddr, nil, "qa@example.com", []string{outRcv.Address}, outMsg)
	var smtpErr *textproto.Error
	require.ErrorAs(t, err, &smtpErr, "mail during the outage: %v", err)
	require.True(t, smtpErr.Code >= 400 && smtpErr.Code < 500, "a temporary refusal during the outage, got %d %s", smtpErr.Code, smtpErr.Msg)
	time.Sleep(outageFor - time.Since(stopped))
	pg.start(t)
	t.Log("postgres started")
	time.Sleep(2 * time.Second)
	close(probeStop)
	<-probeDone
	close(emitStop)
	<-emitStopped
	// The sender's retry is accepted and stored once.
	require.Eventually(t, func() bool {
		return smtp.SendMail(smtpAddr, nil, "qa@example.com", []string{outRcv.Address}, outMsg) == nil
	}, 30*time.Second, 250*time.Millisecond)
	var outState struct {
		MessageCount int `json:"message_count"`
	}
	c.json("GET", api2.http+"/api/accounts/me/receivers/"+outRcv.ID.String(), key, nil, 200, &outState)
	require.Equal(t, 1, outState.MessageCount, "the refused attempt stored nothing; the retry stored one message")

	// After the outage: more events, more mail, more waits.
	require.NoError(t, emit(after))
	mailRound(10)

	// + the mail retried after the outage (each of the 21 messages received
	// over SMTP is an event as it arrives and another once its analysis
	// job ran) + the events committed around the restart; a commit cut by
	// the stop may have landed without its answer: such an event is not
	// counted but must be delivered all the same.
	total := before + after + 2*21 + int(duringOutage.Load())
	var rows int
	require.Eventually(t, func() bool {
		var pending int
		if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status <> 'delivered') FROM webhook_deliveries").Scan(&rows, &pending); err != nil {
			return false
		}
		return rows >= total && pending == 0
	}, 120*time.Second, 200*time.Millisecond, "not every delivery ended delivered; worker-2:\n%s", w2.p.log())
	require.LessOrEqual(t, rows, total+1, "at most the one commit in flight at the stop is unacknowledged")
	waitHTTP(t, w2.http+"/readyz")
	close(stopScrape)
	<-scrapeDone

	idRows, err := pool.Query(ctx, "SELECT id FROM webhook_deliveries")
	require.NoError(t, err)
	ids, err := pgx.CollectRows(idRows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Len(t, ids, rows)
	recvMu.Lock()
	duplicates := 0
	for _, id := range ids {
		n := received[id.String()]
		require.Positive(t, n, "delivery %s never arrived", id)
		duplicates += n - 1
	}
	require.Len(t, received, rows, "no push with an unknown webhook-id")
	recvMu.Unlock()

	statuses := map[int]int64{}
	probeStatuses.Range(func(k, v any) bool { statuses[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("fleet: %d deliveries (%d events committed around the restart), %d arrived twice or more (at least once; same webhook-id); API reads during the outage: %v; %d scrapes",
		rows, duringOutage.Load(), duplicates, statuses, scrapes.Load())
	require.Empty(t, probe500, "no 500, and every 503 has Retry-After and a detail")
	require.Positive(t, statuses[http.StatusServiceUnavailable], "the outage was seen by the API")
	scrapeMu.Lock()
	require.Empty(t, scrapeFails, "every live process's /metrics answers 200 throughout")
	scrapeMu.Unlock()
	// The outage and the recovery, once each per process, at warn and info.
	outageLines := map[*member][2]string{
		api1: {"database unavailable", "database reachable again"}, api2: {"database unavailable", "database reachable again"},
		smtpM: {"database unavailable", "database reachable again"},
		w2:    {"worker lost the database", "worker reaches the database again"},
	}
	for m, lines := range outageLines {
		require.Eventually(t, func() bool {
			log := m.p.log()
			return strings.Count(log, lines[0]) == 1 && strings.Count(log, lines[1]) == 1
		}, 10*time.Second, 50*time.Millisecond, "%s logs the outage and the recovery once each:\n%s", m.name, m.p.log())
		for _, l := range strings.Split(m.p.log(), "\n") {
			switch {
			case strings.Contains(l, lines[0]):
				require.Contains(t, l, `"level":"WARN"`, "%s: %s", m.name, l)
			case strings.Contains(l, lines[1]):
				require.Contains(t, l, `"level":"INFO"`, "%s: %s", m.name, l)
			}
		}
		require.NotContains(t, m.p.log(), `"status":500`, "%s answered a 500", m.name)
	}
	// River's retry loops log each failure once per 30 s, not every 200 ms.
	wlog := w2.p.log()
	errLines := strings.Count(wlog, `"level":"ERROR"`) + strings.Count(wlog, `"level":"WARN"`)
	t.Logf("worker-2: %d warn/error lines for the %s outage", errLines, outageFor)
	require.Less(t, errLines, 30, "the outage is not logged line by line:\n%s", wlog)
}
