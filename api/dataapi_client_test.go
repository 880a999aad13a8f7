package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dataapi"
	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// nodeDeps finds the packages scripts/node-deps installed. Where the suite
// asks for them (MW_NODE_DEPS set, as scripts/test does, or CI set) their
// absence fails the test; elsewhere it is skipped with the command to run.
func nodeDeps(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MW_NODE_DEPS")
	required := dir != "" || os.Getenv("CI") != ""
	if dir == "" {
		dir = filepath.Join("..", ".local", "node-deps")
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	_, statErr := os.Stat(filepath.Join(abs, "node_modules", "@supabase", "postgrest-js", "package.json"))
	if statErr == nil {
		_, statErr = os.Stat(filepath.Join(abs, "node_modules", "@supabase", "supabase-js", "package.json"))
	}
	_, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		if required {
			t.Fatalf("node, @supabase/postgrest-js or @supabase/supabase-js missing (%v, %v): run scripts/node-deps", statErr, nodeErr)
		}
		t.Skip("node, @supabase/postgrest-js or @supabase/supabase-js missing: run scripts/node-deps (required when MW_NODE_DEPS or CI is set)")
	}
	return abs
}

type jsAnswer struct {
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Details *string `json:"details"`
		Hint    *string `json:"hint"`
	} `json:"error"`
	Count  *int `json:"count"`
	Status int  `json:"status"`
}

func (a jsAnswer) rows(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	require.NoError(t, json.Unmarshal(a.Data, &out), string(a.Data))
	return out
}

// TestPostgrestJSClient reads our data API with the real supabase client.
func TestPostgrestJSClient(t *testing.T) {
	t.Parallel()
	deps := nodeDeps(t)
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.DataAPI.Pages = dataapi.NewPages(time.Second, 1<<20) }
	})
	alice, bob := b.createAccount(t), b.createAccount(t)
	ctx := context.Background()
	for i, acct := range []string{alice.ID, alice.ID, alice.ID, bob.ID, bob.ID} {
		typ := []string{"bounce_spike", "health_score_changed"}[i%2]
		_, err := pool.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
			VALUES ($1, $2, $3, 'info', '{"n": 1}', '{}', now() - make_interval(mins => $4))`, uuid.Must(uuid.NewV7()), acct, typ, i)
		require.NoError(t, err)
	}
	for _, who := range []struct{ id, email string }{{alice.ID, "alice@example.net"}, {bob.ID, "bob@example.net"}} {
		_, err := pool.Exec(ctx, `INSERT INTO suppressions (id, account_id, email, email_hash, reason)
			VALUES ($1, $2, $3, sha256(convert_to($3, 'UTF8')), 'manual')`, uuid.Must(uuid.NewV7()), who.id, who.email)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES ($1, $2, 'alice.example.com'), ($3, $4, 'bob.example.com')`,
		uuid.Must(uuid.NewV7()), alice.ID, uuid.Must(uuid.NewV7()), bob.ID)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })
	token := b.token(t, alice.Key)

	cmd := exec.CommandContext(ctx, "node", filepath.Join("..", "internal", "dataapi", "testdata", "js", "client.cjs"))
	cmd.Env = append(os.Environ(), "BASE=http://"+ln.Addr().String(), "TOKEN="+token, "OTHER="+bob.ID,
		"NODE_PATH="+filepath.Join(deps, "node_modules"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err)
	var out map[string]jsAnswer
	require.NoError(t, json.Unmarshal(stdout, &out), string(stdout))

	ok := func(name string, status, n int) jsAnswer {
		a := out[name]
		require.Nil(t, a.Error, "%s: %+v", name, a.Error)
		require.Equal(t, status, a.Status, name)
		if n >= 0 {
			require.Len(t, a.rows(t), n, name)
		}
		return a
	}
	list := ok("list", http.StatusOK, 3)
	require.Len(t, list.rows(t)[0], 3, "the selected columns only")
	for _, r := range ok("filtered", http.StatusOK, 2).rows(t) {
		require.Equal(t, "bounce_spike", r["event_type"])
		require.Equal(t, alice.ID, r["account_id"])
	}
	ok("negated", http.StatusOK, 1)
	ok("inList", http.StatusOK, 2)
	ordered := ok("ordered", http.StatusOK, 2).rows(t)
	require.Greater(t, ordered[0]["created_at"], ordered[1]["created_at"])
	ok("range", http.StatusOK, 3)
	ok("isNull", http.StatusOK, 3)
	counted := ok("counted", http.StatusPartialContent, 2)
	require.NotNil(t, counted.Count)
	require.Equal(t, 3, *counted.Count)
	head := ok("headCount", http.StatusOK, -1)
	require.Equal(t, "null", string(head.Data), "HEAD has no body")
	require.NotNil(t, head.Count)
	require.Equal(t, 3, *head.Count)
	suppressed := ok("newTable", http.StatusOK, 1).rows(t)
	require.Equal(t, "alice@example.net", suppressed[0]["email"], "only Alice's suppression")
	// Alice's 3 events summed per UTC day and type from the hourly counters:
	// 2 rows, or 3 when the minutes before now straddle midnight.
	var summed float64
	for _, r := range out["dailyCounts"].rows(t) {
		require.Equal(t, alice.ID, r["account_id"])
		require.Contains(t, []any{"bounce_spike", "health_score_changed"}, r["event_type"])
		summed += r["events"].(float64)
	}
	require.Equal(t, float64(3), summed)
	require.Equal(t, http.StatusOK, out["dailyCounts"].Status)
	single := ok("single", http.StatusOK, -1)
	var domain map[string]any
	require.NoError(t, json.Unmarshal(single.Data, &domain))
	require.Equal(t, "alice.example.com", domain["name"])
	require.Equal(t, "null", string(ok("maybeNone", http.StatusOK, -1).Data))
	ok("otherAccount", http.StatusOK, 0)

	for name, want := range map[string]struct {
		status int
		code   string
	}{
		"singleOfMany":    {http.StatusNotAcceptable, "PGRST116"},
		"unknownTable":    {http.StatusNotFound, "PGRST205"},
		"unknownColumn":   {http.StatusBadRequest, "42703"},
		"badValue":        {http.StatusBadRequest, "22P02"},
		"unauthenticated": {http.StatusUnauthorized, "PGRST301"},
	} {
		a := out[name]
		require.Equal(t, want.status, a.Status, name)
		require.NotNil(t, a.Error, name)
		require.Equal(t, want.code, a.Error.Code, name)
		require.NotEmpty(t, a.Error.Message, name)
	}
}
