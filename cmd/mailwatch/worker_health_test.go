package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

// tcpProxy forwards a loopback port to Postgres, so that a test can cut a
// process off its database (existing connections dropped, new ones
// refused) and let it back on the same address, or freeze it as SIGSTOP
// freezes Postgres (connections stay open and new ones are accepted, as the
// kernel still acknowledges TCP, but no byte goes through until thawed).
type tcpProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	thawed chan struct{} // non-nil while frozen
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

// gate blocks while the proxy is frozen.
func (p *tcpProxy) gate() {
	p.mu.Lock()
	ch := p.thawed
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// copy is io.Copy that holds every chunk while the proxy is frozen.
func (p *tcpProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops forwarding bytes, keeping every connection open.
func (p *tcpProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed == nil {
		p.thawed = make(chan struct{})
	}
}

// thaw forwards again what froze.
func (p *tcpProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed != nil {
		close(p.thawed)
		p.thawed = nil
	}
}

func (p *tcpProxy) pipe(c net.Conn) {
	p.gate() // accepted, but the frozen server does not answer
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { p.copy(up, c); up.Close(); c.Close() }()
	p.copy(c, up)
	c.Close()
	up.Close()
}

// down drops every connection and refuses new ones.
func (p *tcpProxy) down() {
	p.thaw()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// up listens again on the same address.
func (p *tcpProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}

func readyz(t *testing.T, addr string) (int, jobs.Health) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, jobs.Health{}
	}
	defer resp.Body.Close()
	var h jobs.Health
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	return resp.StatusCode, h
}

// TestWorkerReadinessFollowsItsDatabase is the acceptance test for worker
// health: a worker reports River running, fetching every queue and leading;
// when its database connections are killed and new ones refused it answers
// 503 within jobs.UnreadyAfter (plus one check interval), logs the outage
// once, and is ready again, logging the recovery once, when the database is
// back.
func TestWorkerReadinessFollowsItsDatabase(t *testing.T) {
	t.Parallel()
	pool, dbURL := dbtest.NewDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	opsAddr := freeAddr(t)
	env := append(baseEnv(u.String()), "METRICS_ADDR="+opsAddr, "LOG_LEVEL=info")
	w := startProcess(t, env, "worker")

	var h jobs.Health
	require.Eventually(t, func() bool {
		var code int
		code, h = readyz(t, opsAddr)
		return code == http.StatusOK && h.Leader
	}, 60*time.Second, 100*time.Millisecond, "the worker never became ready and leader:\n%s", w.log())
	require.True(t, h.Ready)
	require.True(t, h.Running)
	require.NotEmpty(t, h.ClientID)
	require.Equal(t, jobs.UnreadyAfter.Seconds(), h.UnreadyAfterSeconds)
	for _, q := range queues.All {
		require.True(t, h.Queues[q].OK, "queue %s fetching", q)
		require.Positive(t, h.Queues[q].Capacity)
	}
	require.Contains(t, w.log(), "now River's leader")

	// Kill its connections from the server side too, as an operator would
	// with pg_terminate_backend, then refuse new ones.
	proxy.down()
	_, err = pool.Exec(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	require.NoError(t, err)
	lost := time.Now()
	var code int
	// Under load a queue's fetch may be judged stalled a moment before the
	// database check says unreachable (both use the same bound): wait for
	// the database's reason.
	require.Eventually(t, func() bool {
		code, h = readyz(t, opsAddr)
		return code == http.StatusServiceUnavailable && strings.Contains(h.Detail, "database unreachable")
	}, 60*time.Second, 100*time.Millisecond, "the worker stayed ready without its database:\n%s", w.log())
	unready := time.Since(lost)
	require.False(t, h.Ready)
	require.Contains(t, h.Detail, "database unreachable")
	require.Greater(t, unready, jobs.UnreadyAfter-time.Second, "a short blip must not make it unready")
	require.Less(t, unready, jobs.UnreadyAfter+3*time.Second, "unready within the documented bound")
	t.Logf("unready %.1fs after the database went away (bound %s)", unready.Seconds(), jobs.UnreadyAfter)

	// Refused for a while longer: still unready, and the outage logged once.
	time.Sleep(3 * time.Second)
	code, _ = readyz(t, opsAddr)
	require.Equal(t, http.StatusServiceUnavailable, code)

	proxy.up(t)
	back := time.Now()
	require.Eventually(t, func() bool {
		code, h = readyz(t, opsAddr)
		return code == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "the worker never became ready again:\n%s", w.log())
	t.Logf("ready %.1fs after the database came back", time.Since(back).Seconds())
	require.True(t, h.Running)
	require.Equal(t, 1, strings.Count(w.log(), "worker lost the database"), w.log())
	require.Eventually(t, func() bool { return strings.Count(w.log(), "worker reaches the database again") == 1 },
		10*time.Second, 100*time.Millisecond, w.log())
}
