package main

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScriptsRunStopsItsPostgresOnCtrlC runs scripts/run as a user does,
// `scripts/run 2>&1 | tee log`, with its own .local/ and bin/, waits until
// the instance answers, then presses Ctrl-C: SIGINT to the whole process
// group, tee included, as a terminal sends it. The private Postgres
// scripts/run started must be stopped by the time scripts/run has exited.
// So must one an earlier run left running (killed with SIGKILL, say),
// which a later scripts/run adopts.
func TestScriptsRunStopsItsPostgresOnCtrlC(t *testing.T) {
	t.Parallel()
	t.Run("Started", func(t *testing.T) { t.Parallel(); testScriptsRunCtrlC(t, false) })
	t.Run("LeftByAnEarlierRun", func(t *testing.T) { t.Parallel(); testScriptsRunCtrlC(t, true) })
}

func testScriptsRunCtrlC(t *testing.T, leftover bool) {
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) == 0 {
		if _, err := exec.LookPath("pg_config"); err != nil {
			t.Skip("no PostgreSQL server binaries (scripts/run would install them)")
		}
	}
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	local, bin := t.TempDir(), t.TempDir()
	listen := freeAddr(t)
	env := append(cleanEnv(),
		"MW_LOCAL_DIR="+local, "MW_BIN_DIR="+bin,
		"LISTEN_ADDR="+listen, "SMTP_ADDR="+freeAddr(t), "UI_ADDR="+freeAddr(t))

	var pgData string
	if leftover {
		// A script that started the cluster and died without stopping it.
		pre := exec.Command("bash", "-c", `source scripts/lib.sh && ensure_postgres`)
		pre.Dir, pre.Env = root, env
		b, err := pre.CombinedOutput()
		require.NoError(t, err, "%s", b)
		owner, err := os.ReadFile(filepath.Join(local, "pg.owner"))
		require.NoError(t, err)
		pgData = strings.Split(string(owner), "\n")[1]
		t.Cleanup(func() {
			stopPostmaster(filepath.Join(pgData, "postmaster.pid"))
			_ = os.RemoveAll(pgData)
		})
		require.FileExists(t, filepath.Join(pgData, "postmaster.pid"), "the cluster is left running")
	}

	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command("bash", "-c", `scripts/run 2>&1 | tee "$1/run.log"`, "bash", local)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	log := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if _, data, ok := strings.Cut(log(), "private Postgres cluster in "); ok && pgData == "" {
			pgData, _, _ = strings.Cut(data, "\n")
		}
		if pgData != "" {
			// A failed run may leave its cluster running; as root it
			// lives outside local (the postgres user's /tmp directory).
			stopPostmaster(filepath.Join(pgData, "postmaster.pid"))
			_ = os.RemoveAll(pgData)
		}
	})

	// Wait for the instance (state, not time): it answers, or scripts/run
	// ended, which fails the test.
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("scripts/run ended before serving (%v):\n%s", err, log())
		default:
		}
		if resp, err := http.Get("http://" + listen + "/readyz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	pgAddr := localEnvDatabaseHost(t, filepath.Join(local, "env"))
	conn, err := net.Dial("tcp", pgAddr)
	require.NoError(t, err, "the private Postgres runs at %s", pgAddr)
	conn.Close()
	owner, err := os.ReadFile(filepath.Join(local, "pg.owner"))
	require.NoError(t, err, "scripts/run records the cluster it started")
	pgData = strings.Split(string(owner), "\n")[1]
	pidFile := filepath.Join(pgData, "postmaster.pid")
	require.FileExists(t, pidFile)
	if leftover {
		require.Contains(t, log(), "adopting the private Postgres")
	}

	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	<-exited // bash waits for scripts/run, which waits for its clean-up

	require.NoFileExists(t, pidFile, "the private Postgres is stopped:\n%s", log())
	_, err = net.Dial("tcp", pgAddr)
	require.Error(t, err, "nothing listens on the private Postgres's port any more")
	require.NoFileExists(t, filepath.Join(local, "pg.owner"))
}

// localEnvDatabaseHost is the host:port of DATABASE_URL in .local/env.
func localEnvDatabaseHost(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "export DATABASE_URL="); ok {
			u, err := url.Parse(strings.Trim(v, "'"))
			require.NoError(t, err)
			return u.Host
		}
	}
	t.Fatalf("%s sets no DATABASE_URL", path)
	return ""
}

// stopPostmaster sends SIGTERM to the postmaster a postmaster.pid names.
func stopPostmaster(pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	var pid int
	for _, c := range strings.SplitN(string(b), "\n", 2)[0] {
		if c < '0' || c > '9' {
			return
		}
		pid = pid*10 + int(c-'0')
	}
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}

// TestLocalEnvCarriesEverySetting: a shell that sources .local/env sees
// what scripts/run gave the instance, so `mailwatch config` there prints
// the running instance's settings, not the defaults.
func TestLocalEnvCarriesEverySetting(t *testing.T) {
	t.Parallel()
	lib, err := filepath.Abs(filepath.Join(repoRoot, "scripts", "lib.sh"))
	require.NoError(t, err)
	binDir := filepath.Dir(buildBinary(t))
	work := t.TempDir()
	listen := freeAddr(t)
	env := append(cleanEnv(), "MW_LOCAL_DIR="+work,
		"DATABASE_URL=postgres://u:hunter2@127.0.0.1:1/mailwatch",
		"MAILWATCH_SECRET_KEY="+strings.Repeat("A", 43)+"=",
		"LISTEN_ADDR="+listen)
	cmd := exec.Command("bash", "-c", `source "$1" && dev_env && write_local_env "$2/env" "$3"`, "bash", lib, work, binDir)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	st, err := os.Stat(filepath.Join(work, "env"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "it holds secrets")

	cmd = exec.Command("bash", "-c", `source "$1/env" && mailwatch config`, "bash", work)
	cmd.Env = cleanEnv()
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{
		"LISTEN_ADDR=" + listen,
		"SMTP_ADDR=127.0.0.1:2525",
		"WEBHOOK_ALLOWED_CIDRS=127.0.0.0/8,::1/128",
		"LOG_FORMAT=text",
		"DEFAULT_PLAN=unlimited",
	} {
		require.Contains(t, strings.Split(string(out), "\n"), want, "mailwatch config after source .local/env:\n%s", out)
	}
	require.NotContains(t, string(out), "hunter2", "still redacted")
}

// TestScriptsRunRefusesATakenAddress: an address the caller chose that
// another program holds (here River UI's) stops scripts/run with an error
// naming the setting, before .local/env could point at the other program,
// and that error exit stops the private Postgres it had started.
func TestScriptsRunRefusesATakenAddress(t *testing.T) {
	t.Parallel()
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) == 0 {
		if _, err := exec.LookPath("pg_config"); err != nil {
			t.Skip("no PostgreSQL server binaries (scripts/run would install them)")
		}
	}
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	local := t.TempDir()
	cmd := exec.Command("scripts/run")
	cmd.Dir = root
	cmd.Env = append(cleanEnv(), "MW_LOCAL_DIR="+local, "MW_BIN_DIR="+t.TempDir(),
		"LISTEN_ADDR="+freeAddr(t), "SMTP_ADDR="+freeAddr(t), "UI_ADDR="+taken.Addr().String())
	out, err := cmd.CombinedOutput()
	if _, data, ok := strings.Cut(string(out), "private Postgres cluster in "); ok {
		data, _, _ = strings.Cut(data, "\n")
		t.Cleanup(func() {
			stopPostmaster(filepath.Join(data, "postmaster.pid"))
			_ = os.RemoveAll(data)
		})
	}
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "UI_ADDR="+taken.Addr().String()+" is taken")
	require.NoFileExists(t, filepath.Join(local, "env"), "no .local/env points at the other program")

	_, port, ok := cutLast(string(out), "starting Postgres on ")
	require.True(t, ok, "scripts/run started its Postgres:\n%s", out)
	port, _, _ = strings.Cut(port, "\n")
	_, err = net.Dial("tcp", port)
	require.Error(t, err, "the Postgres on %s is stopped on the error exit", port)
	require.NoFileExists(t, filepath.Join(local, "pg.owner"))
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
