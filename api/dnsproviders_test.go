package api_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/bindtest"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// setupDNSFix starts BIND serving zone with records and a bundle whose
// server can reach it through DNS connections.
func setupDNSFix(t *testing.T, zone, records string) (*bindtest.Server, *testBundle) {
	bind := bindtest.Start(t, zone, records)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) {
			d.DNSFix = &domains.FixDeps{Env: &dnsfix.Env{Keyring: keyring, Guard: testGuard(t)}}
		}
	})
	return bind, b
}

func TestDNSProviders(t *testing.T) {
	t.Parallel()
	bind, b := setupDNSFix(t, "conn.test", `conn.test. IN TXT "v=spf1 -all"`)
	acct := b.createAccount(t)
	const base = "/api/accounts/me/dns-providers"
	cfg := func(secret string) map[string]any {
		return map[string]any{"server": bind.Addr, "tsig_key_name": bindtest.KeyName, "tsig_secret": secret}
	}

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"kind": "bind", "label": "x", "config": cfg(bind.Secret)}, "kind"},
		{map[string]any{"kind": "rfc2136", "label": "x"}, "config"},
		{map[string]any{"kind": "rfc2136", "label": "x", "config": map[string]any{"server": bind.Addr, "tsig_key_name": "k.", "tsig_secret": "c2VjcmV0", "zone": "x"}}, "config"},
		{map[string]any{"kind": "rfc2136", "label": "x", "config": map[string]any{"server": bind.Addr, "tsig_key_name": "k.", "tsig_secret": "c2VjcmV0", "tsig_algorithm": "md5"}}, "config.tsig_algorithm"},
		{map[string]any{"kind": "cloudflare", "label": "x", "config": map[string]any{}}, "config.api_token"},
		{map[string]any{"kind": "route53", "label": "x", "config": map[string]any{"access_key_id": "AKIA"}}, "config.secret_access_key"},
	} {
		resp := b.do(t, "POST", base, acct.Key, tc.body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%v: %s", tc.body, resp.Body)
		var e struct {
			Errors []struct{ Field string } `json:"errors"`
		}
		resp.JSON(t, &e)
		require.Equal(t, tc.field, e.Errors[0].Field, "%s", resp.Body)
	}

	resp := b.do(t, "POST", base, acct.Key, map[string]any{"kind": "rfc2136", "label": "primary", "config": cfg(bind.Secret)})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var p api.DNSProvider
	resp.JSON(t, &p)
	require.Equal(t, map[string]any{"server": bind.Addr, "tsig_key_name": bindtest.KeyName, "tsig_algorithm": "hmac-sha256"}, p.Config)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", base, acct.Key, map[string]any{"kind": "rfc2136", "label": "primary", "config": cfg(bind.Secret)}).Status)

	// The secret is sealed: the row holds no plaintext.
	var ct []byte
	require.NoError(t, b.db.QueryRow(t.Context(), "SELECT secret_ciphertext FROM dns_connections WHERE id = $1", p.ID).Scan(&ct))
	require.NotContains(t, string(ct), bind.Secret)

	id := p.ID.String()
	resp = b.do(t, "PATCH", base+"/"+id, acct.Key, map[string]any{"label": "renamed", "config": cfg("d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZw==")})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "a refused new key changes nothing: %s", resp.Body)
	resp = b.do(t, "PATCH", base+"/"+id, acct.Key, map[string]any{"label": "renamed"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)

	// Links: the domain must be the account's and in a zone of the server.
	resp = b.do(t, "POST", base+"/"+id+"/links", acct.Key, map[string]any{"domain": "conn.test"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "not a monitored domain: %s", resp.Body)
	createDomain(t, b, acct.Key, "conn.test")
	createDomain(t, b, acct.Key, "elsewhere.example")
	resp = b.do(t, "POST", base+"/"+id+"/links", acct.Key, map[string]any{"domain": "elsewhere.example"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "no zone")
	resp = b.do(t, "POST", base+"/"+id+"/links", acct.Key, map[string]any{"domain": "CONN.test"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)

	resp = b.do(t, "GET", base, acct.Key, nil)
	var list []api.DNSProvider
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, "renamed", list[0].Label)
	require.Equal(t, []api.DNSProviderLink{{Domain: "conn.test", Zone: "conn.test", ZoneID: "conn.test", LinkedAt: list[0].Links[0].LinkedAt}}, list[0].Links)

	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", base+"/"+id, other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", base+"/"+id+"/links", other.Key, map[string]any{"domain": "conn.test"}).Status)

	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", base+"/"+id+"/links", acct.Key, map[string]any{"domain": "conn.test"}).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", base+"/"+id+"/links", acct.Key, map[string]any{"domain": "conn.test"}).Status)
	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", base+"/"+id, acct.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/"+id, acct.Key, nil).Status)
}

func TestDNSRecommendationDismissRestore(t *testing.T) {
	t.Parallel()
	b := domainSetup(t, "dismiss.test. MX 10 mx.dismiss.test.\nmx.dismiss.test. A 192.0.2.1\ndismiss.test. TXT \"v=spf1 mx -all\"\n")
	acct := b.createAccount(t)
	createDomain(t, b.testBundle, acct.Key, "dismiss.test")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me/domains/dismiss.test/dns", acct.Key, nil).Status)
	recs := listRecs(t, b.testBundle, acct.Key, "dismiss.test")
	dm, ok := recs["dmarc"]
	require.True(t, ok, "%v", recs)
	require.Equal(t, []string{"v=DMARC1; p=none"}, dm.Proposed)
	path := "/api/accounts/me/domains/dismiss.test/dns-recommendations/" + dm.ID

	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", path+"/dismiss", acct.Key, map[string]any{}).Status, "reason is required")
	resp := b.do(t, "POST", path+"/dismiss", acct.Key, map[string]any{"reason": "managed by another team"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Equal(t, "dismissed", listRecs(t, b.testBundle, acct.Key, "dismiss.test")["dmarc"].State)

	// Another check with the same records keeps it dismissed.
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me/domains/dismiss.test/dns", acct.Key, nil).Status)
	require.Equal(t, "dismissed", listRecs(t, b.testBundle, acct.Key, "dismiss.test")["dmarc"].State)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", path+"/apply", acct.Key, nil).Status, "restore it first")

	resp = b.do(t, "DELETE", path+"/dismiss", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Equal(t, "open", listRecs(t, b.testBundle, acct.Key, "dismiss.test")["dmarc"].State)
	require.Equal(t, http.StatusConflict, b.do(t, "DELETE", path+"/dismiss", acct.Key, nil).Status)

	// Dismissed again, then the record changes at the zone: it reopens.
	require.Equal(t, http.StatusOK, b.do(t, "POST", path+"/dismiss", acct.Key, map[string]any{"reason": "later"}).Status)
	require.NoError(t, b.dns.Add("_dmarc.dismiss.test. TXT \"v=DMARC1; p=none; pct=50\"\n"))
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me/domains/dismiss.test/dns", acct.Key, nil).Status)
	got := listRecs(t, b.testBundle, acct.Key, "dismiss.test")["dmarc"]
	require.Equal(t, "open", got.State)
	require.Equal(t, dm.ID, got.ID)
	require.Equal(t, []string{"v=DMARC1; p=none"}, got.Proposed)

	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", path+"/dismiss", other.Key, map[string]any{"reason": "x"}).Status)
}
