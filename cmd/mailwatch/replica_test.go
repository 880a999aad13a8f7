package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// startStandby makes a streaming replica (hot standby) of primary with
// pg_basebackup and starts it.
func startStandby(t *testing.T, primary *ownPostgres) *ownPostgres {
	t.Helper()
	dir, err := os.MkdirTemp("", "mailwatch-standby-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if primary.cred != nil {
		require.NoError(t, os.Chown(dir, int(primary.cred.Uid), int(primary.cred.Gid)))
	}
	sb := &ownPostgres{bin: primary.bin, cred: primary.cred, data: filepath.Join(dir, "data")}
	primaryPort := strings.TrimSuffix(strings.Split(primary.url, ":")[2], "/postgres?sslmode=disable")
	sb.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", primaryPort, "-U", "postgres", "-D", sb.data, "-R", "-X", "stream")
	port := strings.Split(freeAddr(t), ":")[1]
	// Later lines win: the copied configuration names the primary's port.
	f, err := os.OpenFile(filepath.Join(sb.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "port = %s\nunix_socket_directories = '%s'\nhot_standby = on\n", port, dir)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	sb.start(t)
	t.Cleanup(func() { _ = sb.cmd("pg_ctl", "-D", sb.data, "-m", "immediate", "-w", "stop").Run() })
	sb.url = "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	return sb
}

// execSQL runs one statement on its own connection.
func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	require.NoError(t, err)
}

// queryText runs one query returning one text value on its own connection.
func queryText(t *testing.T, url, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), sql).Scan(&v))
	return v
}

// TestReadReplica: with DATABASE_READ_URL on a real streaming standby, the
// data API reads the standby while it is fresh (a write the paused standby
// has not replayed is not seen by an API allowing an hour of lag), and an
// API allowing a second of lag goes back to the primary once the standby
// falls behind (it sees the write), then both serve the write once replay
// resumes.
func TestReadReplica(t *testing.T) {
	t.Parallel()
	primary := startOwnPostgres(t)
	migrate := exec.Command(buildBinary(t), "migrate")
	migrate.Env = baseEnv(primary.url)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "%s", out)
	standby := startStandby(t, primary)

	startAPI := func(maxLag string) string {
		addr := freeAddr(t)
		startProcess(t, append(baseEnv(primary.url), "LISTEN_ADDR="+addr, "DATABASE_READ_URL="+standby.url,
			"DATABASE_READ_MAX_LAG="+maxLag), "api")
		base := "http://" + addr
		waitHTTP(t, base+"/readyz")
		return base
	}
	lenient, strict := startAPI("1h"), startAPI("1s")
	c := fleetClient{t: t}
	var acct struct {
		APIKey struct{ Key string } `json:"api_key"`
	}
	c.json("POST", lenient+"/api/accounts", "", map[string]string{"email": "replica@example.com", "password": "a long replica password"}, 201, &acct)
	key := acct.APIKey.Key
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	c.json("POST", lenient+"/api/auth/token", key, nil, 200, &tok)
	receivers := func(base string) int {
		req, err := http.NewRequest("GET", base+"/rest/v1/receivers?select=id", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal(body, &rows))
		return len(rows)
	}
	inUse := func(base string) bool {
		resp, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), "\nmailwatch_db_read_replica_in_use 1\n")
	}
	eventually := func(cond func() bool, what string) {
		t.Helper()
		for !cond() {
			if t.Context().Err() != nil {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	c.json("POST", lenient+"/api/accounts/me/receivers", key, map[string]any{"label": "first"}, 201, nil)
	eventually(func() bool { return inUse(lenient) && receivers(lenient) == 1 }, "the lenient API reads the caught-up standby")
	eventually(func() bool { return inUse(strict) }, "the strict API reads the standby while it keeps up")

	execSQL(t, standby.url, "SELECT pg_wal_replay_pause()")
	// The pause is a request: wait until replay has stopped.
	eventually(func() bool { return queryText(t, standby.url, "SELECT pg_get_wal_replay_pause_state()") == "paused" },
		"the standby's replay pauses")
	c.json("POST", lenient+"/api/accounts/me/receivers", key, map[string]any{"label": "second"}, 201, nil)
	require.Equal(t, 1, receivers(lenient), "the lenient API reads the paused standby, which has not replayed the second receiver")
	require.True(t, inUse(lenient))
	eventually(func() bool { return receivers(strict) == 2 }, "the strict API falls back to the primary")
	require.False(t, inUse(strict))

	execSQL(t, standby.url, "SELECT pg_wal_replay_resume()")
	eventually(func() bool { return receivers(lenient) == 2 }, "the lenient API sees the write once replay resumes")
	eventually(func() bool { return inUse(strict) }, "the strict API returns to the standby once it caught up")
	require.Equal(t, 2, receivers(strict))
}
