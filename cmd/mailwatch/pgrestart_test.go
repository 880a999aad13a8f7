package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
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
