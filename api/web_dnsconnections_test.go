package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/bindtest"
)

// TestDashboardDNSConnections covers the DNS connections page over HTTP
// against a real BIND on loopback: a key BIND refuses is the API's 422 on
// the page (label kept, secret not echoed), the right key connects (another
// kind's field ignored, the secret never rendered), a domain in the
// server's zone links and one outside it is refused with the API's detail,
// unlink, another account's connection is "not found", and delete.
func TestDashboardDNSConnections(t *testing.T) {
	t.Parallel()
	bind, b := setupDNSFix(t, "webconn.test", `webconn.test. IN TXT "v=spf1 -all"`)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "webconn.test")
	createDomain(t, b, acct.Key, "elsewhere.example")
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")

	resp, page := w.req("GET", "/dns-connections", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "No DNS connections yet.")
	require.Contains(t, page, `<a href="/dns-connections" aria-current="page">DNS</a>`)
	tok := csrfAttr.FindStringSubmatch(page)[1]

	const base = "/api/accounts/me/dns-providers"
	listAPI := func() []api.DNSProvider {
		var list []api.DNSProvider
		r := b.do(t, "GET", base, acct.Key, nil)
		require.Equal(t, http.StatusOK, r.Status)
		r.JSON(t, &list)
		return list
	}
	form := func(secret string) url.Values {
		return url.Values{"csrf": {tok}, "kind": {"rfc2136"}, "label": {"Primary BIND"}, "server": {bind.Addr},
			"tsig_key_name": {bindtest.KeyName}, "tsig_algorithm": {"hmac-sha256"}, "tsig_secret": {secret},
			"api_token": {"cf-token-typed-under-another-kind"}}
	}

	const wrong = "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZw=="
	resp, page = w.req("POST", "/dns-connections", form(wrong))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", page)
	require.Regexp(t, `BADKEY|BADSIG`, page, "the API's detail")
	require.Contains(t, page, `value="Primary BIND"`)
	require.NotContains(t, page, wrong)
	require.Empty(t, listAPI())

	resp, page = w.req("POST", "/dns-connections", form(bind.Secret))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", page)
	require.Contains(t, page, "Primary BIND (rfc2136) is connected")
	require.NotContains(t, page, bind.Secret)
	require.NotContains(t, page, "cf-token-typed-under-another-kind")
	list := listAPI()
	require.Len(t, list, 1)
	id := list[0].ID.String()
	require.Equal(t, map[string]any{"server": bind.Addr, "tsig_key_name": bindtest.KeyName, "tsig_algorithm": "hmac-sha256"}, list[0].Config)
	require.Contains(t, page, bind.Addr, "the non-secret settings are listed")

	resp, _ = w.req("POST", "/dns-connections/"+id+"/links", url.Values{"csrf": {tok}, "domain": {"webconn.test"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/dns-connections#c-"+id, resp.Header.Get("Location"))
	_, page = w.req("GET", "/dns-connections", nil)
	require.Contains(t, page, "linked webconn.test (zone webconn.test)")
	require.Regexp(t, `(?s)id="links-`+id+`">\s*<li><span class="mono">webconn.test</span>`, page)
	require.Len(t, listAPI()[0].Links, 1)

	w.req("POST", "/dns-connections/"+id+"/links", url.Values{"csrf": {tok}, "domain": {"elsewhere.example"}})
	_, page = w.req("GET", "/dns-connections", nil)
	require.Contains(t, page, "no zone", "the API's detail")

	w.req("POST", "/dns-connections/"+id+"/links/remove", url.Values{"csrf": {tok}, "domain": {"webconn.test"}})
	require.Empty(t, listAPI()[0].Links)
	_, page = w.req("GET", "/dns-connections", nil)
	require.Contains(t, page, "unlinked webconn.test")

	other := b.createAccount(t)
	w2 := newWebClient(t, b)
	w2.signIn(other.Email, "correct horse battery")
	tok2 := w2.csrf("/dns-connections")
	w2.req("POST", "/dns-connections/"+id+"/delete", url.Values{"csrf": {tok2}})
	_, page = w2.req("GET", "/dns-connections", nil)
	require.Contains(t, page, "DNS connection not found")
	require.Len(t, listAPI(), 1, "untouched")

	resp, _ = w.req("POST", "/dns-connections/"+id+"/delete", url.Values{"csrf": {"wrong"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "CSRF-protected")
	resp, _ = w.req("POST", "/dns-connections/"+id+"/delete", url.Values{"csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Empty(t, listAPI())
	_, page = w.req("GET", "/dns-connections", nil)
	require.Contains(t, page, "DNS connection deleted")
}
