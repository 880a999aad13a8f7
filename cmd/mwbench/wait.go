package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	waitWaiters     = 5000
	waitMsgsPerSec  = 200
	waitSMTPConns   = 4
	waitPoolSize    = 20
	waitAppName     = "mwbench-api"
	waitInboundHost = "inbound.mailwatch.test"
)

// recordingStore notes when each message's DATA ended (Envelope.ReceivedAt)
// per recipient, then delivers through the real Postgres store.
type recordingStore struct {
	*receivers.Store
	mu   sync.Mutex
	seen map[string]time.Time
}

func (s *recordingStore) Deliver(ctx context.Context, env smtpd.Envelope) error {
	s.mu.Lock()
	for _, to := range env.To {
		s.seen[strings.ToLower(to)] = env.ReceivedAt
	}
	s.mu.Unlock()
	return s.Store.Deliver(ctx, env)
}

func (s *recordingStore) receivedAt(addr string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.seen[addr]
	return t, ok
}

// benchWait runs `mailwatch api` as a subprocess (so that its RSS and its
// database connections are its own), holds 5,000 concurrent waiters on it,
// delivers messages over SMTP and measures the time from the end of SMTP
// DATA to the waiter's HTTP response. A `mailwatch worker --queues=analysis`
// subprocess analyses each message meanwhile, as in production; after the
// run the bench reads when each analysis was stored and reports the time
// from the 250 of its DATA.
func benchWait(ctx context.Context, env *benchEnv) error { return runWaitBench(ctx, env, "") }

// waitFilter is what the waiters of `mwbench wait-filtered` ask for: every
// bench message matches (so the wake-up rate is the same as `wait`'s), but
// each wake-up reads the new message and runs the filters on it.
const waitFilter = "&from=%40example.org&subject_contains=CODE&body_contains=your+code&header=To%3A"

// benchWaitFiltered is benchWait with matching waiters (filters on the wait).
func benchWaitFiltered(ctx context.Context, env *benchEnv) error {
	return runWaitBench(ctx, env, waitFilter)
}

func runWaitBench(ctx context.Context, env *benchEnv, filter string) error {
	raiseFileLimit()
	bin, cleanup, err := buildMailwatch(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	api, err := startWaitAPI(ctx, bin, env)
	if err != nil {
		return err
	}
	defer api.Stop()
	worker, err := startAnalysisWorker(ctx, bin, env)
	if err != nil {
		return err
	}
	defer worker.Stop()
	base := api.Base
	waitAccount, apiKey, err := createAccount(ctx, base, fmt.Sprintf("wait-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	if err := setBenchPlan(ctx, env, waitAccount); err != nil { // 5,000 live receivers: business
		return err
	}
	fmt.Printf("api: `mailwatch api` subprocess (pid %d), pool DB_MAX_CONNS=%d; %d waiters, %d msg/s over %d SMTP connections for %s\n",
		api.Pid, waitPoolSize, waitWaiters, waitMsgsPerSec, waitSMTPConns, benchDuration())
	fmt.Printf("analysis: `mailwatch worker --queues=analysis` subprocess (pid %d), DB_MAX_CONNS=%d, WORKER_CONCURRENCY default, no spam filter, DNS on loopback\n",
		worker.Pid, waitPoolSize)
	if filter != "" {
		fmt.Printf("waiters filter: %s\n", filter)
	}

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: waitWaiters * 2, MaxIdleConnsPerHost: waitWaiters * 2, IdleConnTimeout: 5 * time.Minute,
	}}
	rcvs, err := createWaitReceivers(ctx, client, base, apiKey)
	if err != nil {
		return err
	}
	store, smtpAddr, stopSMTP, err := startWaitSMTP(env)
	if err != nil {
		return err
	}
	defer stopSMTP()

	// The waiters: each loops on wait?after=<last>, so 5,000 stay pending.
	waiters := startWaiters(ctx, client, base, apiKey, rcvs, store, filter)
	defer waiters.stop()
	// Let every waiter reach the server and register.
	for i := 0; i < 300 && waiters.waiting.Load() < waitWaiters; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	idleRSS, _ := procStatusKB(api.Pid, "VmRSS")
	idleConns, listenConns, err := apiConnections(ctx, env)
	if err != nil {
		return err
	}
	fmt.Printf("idle:  %d waiters pending, API RSS %.1f MiB, API DB connections %d pool + %d LISTEN\n",
		waiters.waiting.Load(), float64(idleRSS)/1024, idleConns, listenConns)

	acks := newAckLog()
	sent, smtpErrs, maxPool := deliverWaitLoad(ctx, env, smtpAddr, rcvs, acks)
	time.Sleep(500 * time.Millisecond) // the last wake-ups
	loadRSS, _ := procStatusKB(api.Pid, "VmRSS")
	peakRSS, _ := procStatusKB(api.Pid, "VmHWM")
	endConns, endListen, err := apiConnections(ctx, env)
	if err != nil {
		return err
	}

	lats := waiters.sortedLatencies()
	fmt.Printf("load:  %d messages sent (%d SMTP errors), %d waiters woken, %d wait errors, %d still pending\n",
		sent, smtpErrs, len(lats), waiters.failures.Load(), waiters.waiting.Load())
	fmt.Printf("wake latency, end of SMTP DATA -> HTTP response: p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
		ms(percentile(lats, 50)), ms(percentile(lats, 99)), ms(percentile(lats, 100)))
	an, err := collectAnalyses(ctx, env, acks)
	if err != nil {
		return err
	}
	fmt.Printf("analysis, SMTP 250 -> report stored (its job finished): %d analysed (%d unmatched, %d still queued), %.0f analyses/s (first 250 to last stored)\n",
		an.Analysed, an.Unmatched, an.Pending, an.Rate)
	fmt.Printf("  latency p50 %.2f ms  p99 %.2f ms  max %.2f ms;  the job's run alone p50 %.2f ms  p99 %.2f ms\n",
		ms(percentile(an.Latencies, 50)), ms(percentile(an.Latencies, 99)), ms(percentile(an.Latencies, 100)),
		ms(percentile(an.Runs, 50)), ms(percentile(an.Runs, 99)))
	fmt.Printf("targets with analysis on: wake p50 < 20 ms, p99 < 100 ms: %s\n", metOrNot(percentile(lats, 50), percentile(lats, 99)))
	fmt.Printf("API RSS: %.1f MiB with waiters idle, %.1f MiB after load, peak %.1f MiB\n",
		float64(idleRSS)/1024, float64(loadRSS)/1024, float64(peakRSS)/1024)
	fmt.Printf("API DB connections: max %d pool connections during load (pool size %d) + %d LISTEN; at end %d + %d\n",
		maxPool, waitPoolSize, listenConns, endConns, endListen)

	base1, err := measureAuthRoute(ctx, env, 32, 3*time.Second)
	if err == nil {
		fmt.Printf("baseline authenticated GET (in-process, 32 conns): %s\n", base1)
	}
	return nil
}

// startWaitAPI starts bin as `mailwatch api` with the wait bench's
// settings: its own application_name (apiConnections counts by it), a pool
// of waitPoolSize, no effective rate limit. Unlike startAPI it logs to
// stderr, until Stop, when stopping it ends every pending wait with a
// (logged) 503 by design.
func startWaitAPI(ctx context.Context, bin string, env *benchEnv) (*apiProcess, error) {
	apiAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "api")
	cmd.Env = append(waitProcessEnv(env, waitAppName),
		"LISTEN_ADDR="+apiAddr,
		"RATE_LIMIT_PER_MINUTE=1000000",
		"INBOUND_DOMAIN="+waitInboundHost,
		"DB_MAX_CONNS="+strconv.Itoa(waitPoolSize),
		"LOG_LEVEL=warn",
		"SHUTDOWN_TIMEOUT=5s",
	)
	quiet := &switchWriter{w: os.Stderr}
	cmd.Stdout, cmd.Stderr = quiet, quiet
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting mailwatch api: %w", err)
	}
	stop := func() {
		quiet.off.Store(true)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	base := "http://" + apiAddr
	if err := waitReady(ctx, base+"/readyz"); err != nil {
		stop()
		return nil, err
	}
	return &apiProcess{Base: base, Pid: cmd.Process.Pid, stop: stop}, nil
}

// waitReceiver is one receiver the wait bench holds a waiter on.
type waitReceiver struct{ id, address string }

// createWaitReceivers creates waitWaiters receivers through the API, 32 at
// a time.
func createWaitReceivers(ctx context.Context, client *http.Client, base, apiKey string) ([]waitReceiver, error) {
	rcvs := make([]waitReceiver, waitWaiters)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 32)
	for i := range rcvs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var r struct {
				ID      string `json:"id"`
				Address string `json:"address"`
			}
			if err := doJSON(ctx, client, "POST", base+"/api/accounts/me/receivers", apiKey, `{"ttl_seconds":3600}`, http.StatusCreated, &r); err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			rcvs[i] = waitReceiver{r.ID, r.Address}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return nil, fmt.Errorf("error creating receivers: %w", err)
	}
	return rcvs, nil
}

// startWaitSMTP serves inbound SMTP on a loopback port, delivering into the
// bench database through a recordingStore; stop closes the server.
func startWaitSMTP(env *benchEnv) (store *recordingStore, addr string, stop func(), err error) {
	riverClient, err := jobs.NewClient(jobs.Deps{Pool: env.Pool, Logger: env.Logger}, jobs.Options{})
	if err != nil {
		return nil, "", nil, err
	}
	store = &recordingStore{Store: &receivers.Store{DB: env.Pool, Emitter: &events.Emitter{River: riverClient}}, seen: map[string]time.Time{}}
	smtpSrv, err := smtpd.NewServer(smtpd.Config{Domain: waitInboundHost}, store, nil)
	if err != nil {
		return nil, "", nil, err
	}
	smtpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	go func() { _ = smtpSrv.Serve(smtpLn) }()
	return store, smtpLn.Addr().String(), func() { smtpSrv.Close() }, nil
}

// waiterPool is the wait bench's long-poll waiters, one per receiver, and
// what they observed.
type waiterPool struct {
	latMu     sync.Mutex
	latencies []time.Duration
	waiting   atomic.Int64
	failures  atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// filter is appended to every wait's query string (wait-filtered).
	filter string
}

// startWaiters starts one waiter per receiver; stop ends them.
func startWaiters(ctx context.Context, client *http.Client, base, apiKey string, rcvs []waitReceiver, store *recordingStore, filter string) *waiterPool {
	p := &waiterPool{filter: filter}
	waitCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	for _, r := range rcvs {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.wait(waitCtx, client, base, apiKey, r, store)
		}()
	}
	return p
}

// stop cancels the waiters and waits for them to return.
func (p *waiterPool) stop() { p.cancel(); p.wg.Wait() }

// wait loops on r's wait?after=<last> until ctx ends, recording the time
// from the end of SMTP DATA to each message's response.
func (p *waiterPool) wait(ctx context.Context, client *http.Client, base, apiKey string, r waitReceiver, store *recordingStore) {
	after := ""
	for ctx.Err() == nil {
		url := base + "/api/accounts/me/receivers/" + r.id + "/wait?timeout=60" + p.filter
		if after != "" {
			url += "&after=" + after
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		p.waiting.Add(1)
		resp, err := client.Do(req)
		p.waiting.Add(-1)
		now := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				p.failures.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var m struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			after = m.ID
			if at, ok := store.receivedAt(strings.ToLower(r.address)); ok {
				p.latMu.Lock()
				p.latencies = append(p.latencies, now.Sub(at))
				p.latMu.Unlock()
			}
		case http.StatusNoContent:
		default:
			p.failures.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sortedLatencies returns a sorted copy of the wake latencies so far.
func (p *waiterPool) sortedLatencies() []time.Duration {
	p.latMu.Lock()
	lats := append([]time.Duration(nil), p.latencies...)
	p.latMu.Unlock()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	return lats
}

// deliverWaitLoad sends waitMsgsPerSec messages a second over waitSMTPConns
// connections for benchDuration, round-robin over receivers, so each gets
// a message only every waitWaiters/waitMsgsPerSec seconds and its waiter
// is re-armed. It samples the API's pool connections meanwhile and returns
// the largest count. acks notes each message's 250.
func deliverWaitLoad(ctx context.Context, env *benchEnv, smtpAddr string, rcvs []waitReceiver, acks *ackLog) (sent, smtpErrs, maxPool int64) {
	var next, nSent, nErrs atomic.Int64
	deadline := time.Now().Add(benchDuration())
	var swg sync.WaitGroup
	for c := 0; c < waitSMTPConns; c++ {
		swg.Add(1)
		go func() {
			defer swg.Done()
			interval := time.Second * time.Duration(waitSMTPConns) / waitMsgsPerSec
			tick := time.NewTicker(interval)
			defer tick.Stop()
			sc, err := smtp.Dial(smtpAddr)
			if err != nil {
				nErrs.Add(1)
				return
			}
			defer sc.Close()
			if err := sc.Hello("bench.example"); err != nil {
				nErrs.Add(1)
				return
			}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				<-tick.C
				r := rcvs[int(next.Add(1)-1)%len(rcvs)]
				if err := sendOne(sc, r.address); err != nil {
					nErrs.Add(1)
					continue
				}
				acks.add(r.address, time.Now()) // sendOne returns on the 250 after DATA
				nSent.Add(1)
			}
		}()
	}
	maxPool = sampleMaxPool(ctx, env, deadline)
	swg.Wait()
	return nSent.Load(), nErrs.Load(), maxPool
}

// sampleMaxPool samples the API's pool connections every 250 ms until
// deadline and returns the largest count.
func sampleMaxPool(ctx context.Context, env *benchEnv, deadline time.Time) int64 {
	var maxPool int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, _, err := apiConnections(ctx, env); err == nil && int64(n) > maxPool {
			maxPool = int64(n)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return maxPool
}

func sendOne(sc *smtp.Client, to string) error {
	if err := sc.Mail("bench@example.org"); err != nil {
		return err
	}
	if err := sc.Rcpt(to); err != nil {
		_ = sc.Reset()
		return err
	}
	w, err := sc.Data()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "From: bench@example.org\r\nTo: %s\r\nSubject: code\r\n\r\nYour code is 123456.\r\n", to)
	return w.Close()
}

// apiConnections counts the API subprocess's connections in
// pg_stat_activity: pool connections and the LISTEN connection.
func apiConnections(ctx context.Context, env *benchEnv) (pool, listen int, err error) {
	err = env.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE application_name = $1),
		count(*) FILTER (WHERE application_name = $1 || '-listener') FROM pg_stat_activity`, waitAppName).Scan(&pool, &listen)
	return pool, listen, err
}

func procStatusKB(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// raiseFileLimit lifts the soft open-file limit to the hard one: 5,000
// waiters need 5,000 sockets here and as many in the API (which inherits it).
func raiseFileLimit() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < 2*waitWaiters+1000 {
		fmt.Fprintf(os.Stderr, "warning: open-file limit %d is below %d; raise it (ulimit -Hn) for 5,000 waiters\n", lim.Cur, 2*waitWaiters+1000)
	}
}

func buildMailwatch(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "mwbench-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "mailwatch")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mailwatch").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("error building mailwatch (run from the repository root): %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the API did not become ready at %s", url)
}

func doJSON(ctx context.Context, client *http.Client, method, url, key, body string, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// switchWriter forwards to w until off is set.
type switchWriter struct {
	w   io.Writer
	off atomic.Bool
}

func (s *switchWriter) Write(p []byte) (int, error) {
	if s.off.Load() {
		return len(p), nil
	}
	return s.w.Write(p)
}

// waitSecretKey is the MAILWATCH_SECRET_KEY of the bench's processes: one
// per run, shared by the API and the analysis worker as in a deployment.
var waitSecretKey = func() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}()

// waitProcessEnv is the environment of a mailwatch process of the wait
// bench: the bench database under its own application_name (so its
// connections can be counted apart) and the run's secret key.
func waitProcessEnv(env *benchEnv, appName string) []string {
	sep := "?"
	if strings.Contains(env.URL, "?") {
		sep = "&"
	}
	return append(os.Environ(), "DATABASE_URL="+env.URL+sep+"application_name="+appName, "MAILWATCH_SECRET_KEY="+waitSecretKey)
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
