package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// dataAPI reads path of the data API with token, naming account in
// X-Mailwatch-Account when it is not empty.
func (b *testBundle) dataAPI(t *testing.T, path, token, account string) response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if account != "" {
		req.Header.Set("X-Mailwatch-Account", account)
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: body.Bytes()}
	checkConformance(t, b.srv, "GET", path, token, nil, out)
	return out
}

// addEvent gives account one event, so that a read shows whose rows it got.
func (b *testBundle) addEvent(t *testing.T, account string) {
	t.Helper()
	_, err := b.db.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, payload, rendered)
		VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}')`, uuid.Must(uuid.NewV7()), account)
	require.NoError(t, err)
}

// TestAuthProviderIssuerSquatting: accounts that register the victim's
// identity provider (its issuer and public JWKS) and link its users, one
// before the victim and one after, never receive the victim's users'
// requests, and nothing they hold reaches the victim's account. A provider
// token reaches only the account its request names.
func TestAuthProviderIssuerSquatting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	victimIdP := newTestIdP(t)
	early, victim, late := b.createAccount(t), b.createAccount(t), b.createAccount(t)
	for _, a := range []account{early, victim, late} {
		b.addEvent(t, a.ID)
	}
	link := func(a account, pid string, body map[string]any) {
		resp := b.do(t, "POST", "/api/accounts/me/auth-providers/"+pid+"/links", a.Key, body)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	squat := func(a account) {
		pid := b.createAuthProvider(t, a.Key, "oidc", victimIdP, "")["id"].(string)
		link(a, pid, map[string]any{"subject": "user-v"})
		link(a, pid, map[string]any{"email": "v@example.com"})
	}
	only := func(resp response, a account) {
		t.Helper()
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.JSONEq(t, fmt.Sprintf(`[{"account_id":%q}]`, a.ID), string(resp.Body))
	}
	const read = "/rest/v1/events?select=account_id"
	tok := victimIdP.token(t, "user-v", "v@example.com", "app")

	squat(early)
	// Before the victim configures its provider, its users' tokens (sent
	// by its app, naming its account) read nothing.
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, read, tok, victim.ID).Status)

	vpid := b.createAuthProvider(t, victim.Key, "oidc", victimIdP, "")["id"].(string)
	link(victim, vpid, map[string]any{"subject": "user-v"})
	squat(late)
	only(b.dataAPI(t, read, tok, victim.ID), victim)

	// A provider token that names no account is refused, and says why.
	resp := b.dataAPI(t, read, tok, "")
	require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "X-Mailwatch-Account")
	resp = b.dataAPI(t, read, tok, "not-an-account")
	require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)

	// The squatters' reach into the victim's account: their own IdP's
	// token (its user linked only by them), a key of theirs under the
	// victim's issuer and kid, and the victim IdP's token of a user only
	// they linked are all refused.
	own := newTestIdP(t)
	opid := b.createAuthProvider(t, early.Key, "oidc", own, "")["id"].(string)
	link(early, opid, map[string]any{"subject": "user-v"})
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, read, own.token(t, "user-v", "", "app"), victim.ID).Status)
	forged := newTestIdP(t)
	forged.issuer, forged.kid = victimIdP.issuer, victimIdP.kid
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, read, forged.token(t, "user-v", "", "app"), victim.ID).Status)
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, read, victimIdP.token(t, "user-x", "v@example.com", "app"), victim.ID).Status,
		"the victim linked user-v by subject; an email match in a squatter's account must not reach it")
	only(b.dataAPI(t, read, own.token(t, "user-v", "", "app"), early.ID), early)

	// The victim's own reads stay the victim's whatever the squatters add.
	only(b.dataAPI(t, read, tok, victim.ID), victim)
}

// TestAuthProviderCapUnderConcurrency: parallel creates never take an
// account past its 10 identity providers; the rest are 409 naming the cap.
func TestAuthProviderCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	acct := b.createAccount(t)
	idp := newTestIdP(t)
	statuses, details := raceCreates(t, b, acct, 30, "/api/accounts/me/auth-providers", func(i int) map[string]any {
		return map[string]any{"kind": "oidc", "issuer": fmt.Sprintf("https://idp%d.example/", i), "jwks_url": idp.srv.URL, "audience": "app"}
	})
	requireCapped(t, statuses, details, 10, "identity providers")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM auth_providers WHERE account_id = $1", acct.ID).Scan(&n))
	require.Equal(t, 10, n)
}

// TestDNSConnectionCapUnderConcurrency: the same for DNS connections
// (verified against Cloudflare's token endpoint on loopback).
func TestDNSConnectionCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	cf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"success":true,"errors":[],"messages":[],"result":{"id":"ed17574386854bf78a67040be0a770b0","status":"active"}}`))
	}))
	t.Cleanup(cf.Close)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) {
			d.DNSFix = &domains.FixDeps{Env: &dnsfix.Env{Keyring: keyring, Guard: testGuard(t), CloudflareURL: cf.URL + "/client/v4"}}
		}
	})
	acct := b.createAccount(t)
	statuses, details := raceCreates(t, b, acct, 30, "/api/accounts/me/dns-providers", func(i int) map[string]any {
		return map[string]any{"kind": "cloudflare", "label": fmt.Sprintf("cf%d", i), "config": map[string]any{"api_token": "good-token-123456"}}
	})
	requireCapped(t, statuses, details, 10, "DNS connections")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM dns_connections WHERE account_id = $1", acct.ID).Scan(&n))
	require.Equal(t, 10, n)
}

// raceCreates sends n creates to path at once and returns their statuses
// and details.
func raceCreates(t *testing.T, b *testBundle, acct account, n int, path string, body func(int) map[string]any) ([]int, []string) {
	t.Helper()
	statuses, details := make([]int, n), make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		raw, err := json.Marshal(body(i))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := httptest.NewRequest("POST", path, bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+acct.Key)
			resp, err := b.srv.App().Test(req, -1)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var e struct {
				Detail string `json:"detail"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			statuses[i], details[i] = resp.StatusCode, e.Detail
		}()
	}
	close(start)
	wg.Wait()
	return statuses, details
}

func requireCapped(t *testing.T, statuses []int, details []string, max int, noun string) {
	t.Helper()
	created := 0
	for i, s := range statuses {
		if s == http.StatusCreated {
			created++
			continue
		}
		require.Equal(t, http.StatusConflict, s, "%s", details[i])
		require.True(t, strings.Contains(details[i], fmt.Sprintf("at most %d %s", max, noun)), "%s", details[i])
	}
	require.Equal(t, max, created, "statuses %v", statuses)
}
