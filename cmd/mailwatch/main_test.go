package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildBinary builds the real mailwatch binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mailwatch-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "mailwatch")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// baseEnv is the environment for a subprocess on database url.
func baseEnv(url string) []string {
	return append(os.Environ(),
		"DATABASE_URL="+url,
		"MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		"LOG_FORMAT=json",
		"REDIS_URL=",
	)
}

// process is a running mailwatch subprocess whose stderr is captured.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(buildBinary(t), args...), done: make(chan error, 1)}
	p.cmd.Env = env
	pipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stderr:\n%s", strings.Join(args, " "), p.log())
		}
	})
	return p
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	for i := 0; i < 300; i++ {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered 200", url)
}

func TestMigrateCommandIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	_, err := pool.Exec(context.Background(), "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
	require.NoError(t, err)

	out, err := exec.Command(buildBinary(t), "migrate").CombinedOutput()
	require.Error(t, err, "no DATABASE_URL")
	require.Contains(t, string(out), "DATABASE_URL")

	cmd := exec.Command(buildBinary(t), "migrate")
	cmd.Env = baseEnv(url)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "applied: river:")

	cmd = exec.Command(buildBinary(t), "migrate")
	cmd.Env = baseEnv(url)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "database is up to date")
}

func TestAPIProcessServesAndShutsDownGracefully(t *testing.T) {
	t.Parallel()
	_, url := dbtest.NewDB(t)
	addr := freeAddr(t)
	p := startProcess(t, append(baseEnv(url), "LISTEN_ADDR="+addr), "api")
	base := "http://" + addr
	waitHTTP(t, base+"/readyz")

	// The README's walk-through: create an account, use its key.
	resp, err := http.Post(base+"/api/accounts", "application/json",
		strings.NewReader(`{"email": "readme@example.com", "password": "a long password"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	i := bytes.Index(body, []byte(`"key":"mw_`))
	require.Positive(t, i, "%s", body)
	key := string(body[i+7 : i+7+43])

	req, _ := http.NewRequest("GET", base+"/api/accounts/me/dashboard-summary", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(base + "/api/accounts/me/dashboard-summary")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(body), `"detail"`)

	// SIGTERM: the process logs its shutdown and exits 0.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("api did not exit after SIGTERM")
	}
	require.Contains(t, p.log(), "API shutting down")
	require.Contains(t, p.log(), `"route":"/api/accounts"`, "access log")
	require.NotContains(t, p.log(), key, "keys never reach the log")
}

func TestWorkerProcessRunsPeriodicMaintenance(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	p := startProcess(t, append(baseEnv(url), "METRICS_ADDR="+freeAddr(t)), "worker")
	// The usage prune job runs on start; wait until River completed it.
	var done bool
	for i := 0; i < 200 && !done; i++ {
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = 'usage_prune' AND state = 'completed')").Scan(&done))
		if !done {
			time.Sleep(100 * time.Millisecond)
		}
	}
	require.True(t, done, "usage_prune never completed:\n%s", p.log())
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
	p.done <- nil
}

func TestUnknownCommandIsUsageError(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(buildBinary(t), "frobnicate")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, 2, exitErr.ExitCode())
	require.Contains(t, string(out), "Run 'mailwatch help' for usage.")
}
