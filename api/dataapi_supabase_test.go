package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestSupabaseJSFilters reads the data API with the real supabase-js
// client, one query per filter method (like, ilike, not, or, match,
// contains, containedBy, overlaps, in, is, textSearch...), and checks each
// answer's rows against the data. Bob holds the same five events as Alice,
// so a condition that let his rows through would show in every count.
func TestSupabaseJSFilters(t *testing.T) {
	t.Parallel()
	deps := nodeDeps(t)
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	alice, bob := b.createAccount(t), b.createAccount(t)
	ctx := context.Background()
	for _, acct := range []string{alice.ID, bob.ID} {
		for _, e := range []struct {
			name, typ, severity string
			domain              *string
			tags                []string
			payload             string
		}{
			{"e1", "bounce_spike", "info", textPtr("shop.example.com"), []string{"prod", "eu"}, `{"k": "e1", "provider": "ses"}`},
			{"e2", "health_score_changed", "info", textPtr("blog.example.org"), []string{"prod"}, `{"k": "e2"}`},
			{"e3", "dmarc_failure", "info", textPtr("100%_off.example.net"), []string{}, `{"k": "e3", "provider": "ses", "note": "the quick brown foxes"}`},
			{"e4", "bounce_spike", "info", textPtr("1000_off.example.net"), []string{"us"}, `{"k": "e4"}`},
			{"e5", "health_score_changed", "critical", nil, []string{"eu"}, `{"k": "e5"}`},
		} {
			_, err := pool.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload, rendered)
				VALUES ($1, $2, $3, $4, $5, $6, $7, '{}')`, uuid.Must(uuid.NewV7()), acct, e.typ, e.severity, e.domain, e.tags, e.payload)
			require.NoError(t, err)
		}
	}
	_, err := pool.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES ($1, $2, 'alice.example.com'), ($3, $4, 'bob.example.com')`,
		uuid.Must(uuid.NewV7()), alice.ID, uuid.Must(uuid.NewV7()), bob.ID)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })

	cmd := exec.CommandContext(ctx, "node", filepath.Join("..", "internal", "dataapi", "testdata", "js", "supabase.cjs"))
	cmd.Env = append(os.Environ(), "BASE=http://"+ln.Addr().String(), "TOKEN="+b.token(t, alice.Key), "OTHER="+bob.ID,
		"NODE_PATH="+filepath.Join(deps, "node_modules"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err)
	var out map[string]jsAnswer
	require.NoError(t, json.Unmarshal(stdout, &out), string(stdout))

	for name, want := range map[string][]string{
		"like":           {"e1"},
		"likePercent":    {"e3", "e4"}, // % is LIKE's wildcard, as in PostgREST
		"likeEscaped":    {"e3"},       // \% is a percent sign
		"likeUnderscore": {"e3", "e4"}, // _ is any one character
		"ilike":          {"e1"},
		"likeAnyOf":      {"e1", "e2"},
		"ilikeAllOf":     {"e4"},
		"notIlike":       {"e1", "e2"},
		"notIn":          {"e2", "e5"},
		"notIsNull":      {"e1", "e2", "e3", "e4"},
		"or":             {"e2", "e3"},
		"orNested":       {"e1", "e5"},
		"orNegated":      {"e2", "e3", "e5"},
		"orQuoted":       {"e3", "e4"},
		"orOtherAccount": {"e1", "e4"},
		"match":          {"e1"},
		"contains":       {"e1", "e2"},
		"containedBy":    {"e1", "e2", "e3", "e5"},
		"overlaps":       {"e1", "e4", "e5"},
		"containsJSON":   {"e1", "e3"},
		"in":             {"e1", "e3", "e4"},
		"is":             {"e5"},
		"isDistinct":     {"e2", "e3", "e4", "e5"},
		"textSearch":     {"e3"},
		"otherAccount":   {},
	} {
		a := out[name]
		require.Nil(t, a.Error, "%s: %+v", name, a.Error)
		require.Equal(t, http.StatusOK, a.Status, name)
		got := []string{}
		for _, row := range a.rows(t) {
			require.Equal(t, alice.ID, row["account_id"], "%s: only Alice's rows", name)
			got = append(got, row["payload"].(map[string]any)["k"].(string))
		}
		sort.Strings(got)
		require.Equal(t, want, got, name)
	}

	domains := out["domainAlias"].rows(t)
	require.Len(t, domains, 1)
	require.Equal(t, "alice.example.com", domains[0]["domain"], "the REST name of the column")
	require.Equal(t, domains[0]["name"], domains[0]["domain"])

	for name, code := range map[string]string{"regexMatch": "PGRST100", "rangeGt": "42883", "likeOnUUID": "42883"} {
		a := out[name]
		require.Equal(t, http.StatusBadRequest, a.Status, name)
		require.NotNil(t, a.Error, name)
		require.Equal(t, code, a.Error.Code, name)
	}
	require.Contains(t, out["regexMatch"].Error.Message, `"match"`)
}

func textPtr(s string) *string { return &s }
