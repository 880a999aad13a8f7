package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// loopbackBrowser is a client of a server on a real loopback socket that
// keeps cookies and does not follow redirects, so a test reads each
// Location as a browser would receive it.
type loopbackBrowser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func serveLoopback(t *testing.T, b *testBundle) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

func newLoopbackBrowser(t *testing.T, base string) *loopbackBrowser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &loopbackBrowser{t: t, base: base, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// send makes one request; rawPath goes on the wire as written.
func (lb *loopbackBrowser) send(method, rawPath string, form url.Values) (*http.Response, string) {
	lb.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, lb.base+"/", body)
	require.NoError(lb.t, err)
	req.URL.Opaque = rawPath // keeps %09 and friends exactly as given
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", lb.base)
	}
	resp, err := lb.c.Do(req)
	require.NoError(lb.t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(lb.t, err)
	return resp, string(page)
}

// TestSignInRedirectStaysOnSite: the reported ?next=%2F%09%2Fevil.example
// and its variants, through the real sign-in flow on a socket: the form
// carries "/" instead, a hostile next posted by hand is replaced by "/",
// and a signed-in visit to /signin?next=... goes to "/". A next on this
// site is kept through the whole flow.
func TestSignInRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	base := serveLoopback(t, b)

	hostile := []string{
		"%2F%09%2Fevil.example",
		"%2F%0A%2Fevil.example",
		"%2F%0D%0A%2Fevil.example",
		"%09%2F%2Fevil.example",
		"%2F%5Cevil.example",
		"%5C%5Cevil.example",
		"%2F%2Fevil.example",
		"https%3A%2F%2Fevil.example",
		"%2F%2509%2Fevil.example",
		"%2F%252F%2Fevil.example",
		"%2F%C2%A0%2Fevil.example",
	}
	for _, next := range hostile {
		lb := newLoopbackBrowser(t, base)
		resp, page := lb.send("GET", "/signin?next="+next, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", next)
		require.Contains(t, page, `name="next" value="/"`, "the form carries / for %s", next)
		csrf := csrfAttr.FindStringSubmatch(page)[1]

		// A hostile next posted with the form (a page of the attacker's
		// could build such a form) is refused too.
		decoded, err := url.QueryUnescape(next)
		require.NoError(t, err)
		resp, _ = lb.send("POST", "/signin", url.Values{"csrf": {csrf}, "email": {acct.Email},
			"password": {"correct horse battery"}, "next": {decoded}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s", next)
		require.Equal(t, "/", resp.Header.Get("Location"), "sign-in with next=%s", next)

		// Already signed in, /signin redirects at once: to "/".
		resp, _ = lb.send("GET", "/signin?next="+next, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s", next)
		require.Equal(t, "/", resp.Header.Get("Location"), "signed-in /signin?next=%s", next)
	}

	// A page of this site survives the round trip through sign-in.
	lb := newLoopbackBrowser(t, base)
	resp, _ := lb.send("GET", "/domains?x=1", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc := resp.Header.Get("Location")
	require.Equal(t, "/signin?next=%2Fdomains%3Fx%3D1", loc)
	resp, page := lb.send("GET", loc, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `name="next" value="/domains?x=1"`)
	resp, _ = lb.send("POST", "/signin", url.Values{"csrf": {csrfAttr.FindStringSubmatch(page)[1]}, "email": {acct.Email},
		"password": {"correct horse battery"}, "next": {"/domains?x=1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/domains?x=1", resp.Header.Get("Location"))
}

// trustedAppTest makes the server take X-Forwarded-For from app.Test's
// connection (address 0.0.0.0) as the client IP, as it would from a proxy
// named in TRUSTED_PROXIES.
func trustedAppTest(o *setupOpts) {
	o.deps = func(d *api.Deps) { d.TrustedProxies = []string{"0.0.0.0"} }
}

// tokenFrom asks POST /api/auth/token for a token by password, as the
// client at ip, with the given cookies; the answer is checked against the
// OpenAPI document.
func (b *testBundle) tokenFrom(t *testing.T, ip, email, password string, cookies ...*http.Cookie) response {
	t.Helper()
	raw, err := json.Marshal(map[string]string{"email": email, "password": password})
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/api/auth/token", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", ip)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	checkConformance(t, b.srv, "POST", "/api/auth/token", "", raw, out)
	return out
}

// requireLimited checks a 429 of the per-account budget.
func requireLimited(t *testing.T, status int, header http.Header, body string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	secs, err := strconv.Atoi(header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", header.Get("Retry-After"))
	require.Positive(t, secs)
	require.LessOrEqual(t, secs, 60, "the first delay is a minute")
	require.Contains(t, body, "too many failed sign-ins for this account")
}

// TestPasswordGuessingIsLimitedPerAccount: wrong passwords spread over
// many client IPs and over both routes that check a password (the token
// route's password grant and the dashboard's sign-in) spend one budget per
// account; once spent, the right password from a fresh IP is refused on
// both routes, while the owner's browser that signed in before (its
// mw_device cookie) still signs in, the account's API key still gets a
// token, and other accounts are untouched.
func TestPasswordGuessingIsLimitedPerAccount(t *testing.T) {
	t.Parallel()
	b := setup(t, trustedAppTest)
	const right = "correct horse battery"

	t.Run("TokenRouteAlone", func(t *testing.T) {
		acct := b.createAccount(t)
		for i := range 10 {
			resp := b.tokenFrom(t, fmt.Sprintf("203.0.113.%d", i+1), acct.Email, "wrong password!")
			require.Equal(t, http.StatusUnauthorized, resp.Status, "guess %d: %s", i+1, resp.Body)
		}
		resp := b.tokenFrom(t, "192.0.2.200", acct.Email, right)
		requireLimited(t, resp.Status, resp.Header, resp.Detail(t))
		// Guesses refused meanwhile are not compared: still refused.
		resp = b.tokenFrom(t, "192.0.2.201", acct.Email, "another guess!")
		requireLimited(t, resp.Status, resp.Header, resp.Detail(t))
		// The API-key grant is no password check.
		require.Equal(t, http.StatusOK, b.do(t, "POST", "/api/auth/token", acct.Key, nil).Status)
	})

	t.Run("SharedByDashboardAndTokenRoute", func(t *testing.T) {
		acct, other := b.createAccount(t), b.createAccount(t)

		// The owner signed in from their browser before the attack.
		owner := newWebClient(t, b)
		owner.ip = "198.51.100.7"
		resp, page := owner.signIn(acct.Email, right)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s", page)
		device := owner.cookies["mw_device"]
		require.NotNil(t, device, "a right password makes the browser a known device")
		require.True(t, device.HttpOnly)
		require.Equal(t, http.SameSiteLaxMode, device.SameSite)
		delete(owner.cookies, "mw_session")

		// Ten guesses from ten IPs, half on each route.
		for i := range 10 {
			ip := fmt.Sprintf("203.0.113.%d", 100+i)
			if i%2 == 0 {
				r := b.tokenFrom(t, ip, acct.Email, "wrong password!")
				require.Equal(t, http.StatusUnauthorized, r.Status, "guess %d: %s", i+1, r.Body)
				continue
			}
			w := newWebClient(t, b)
			w.ip = ip
			resp, page := w.signIn(acct.Email, "wrong password!")
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "guess %d: %s", i+1, page)
		}

		// The right password from fresh IPs: refused on both routes.
		r := b.tokenFrom(t, "192.0.2.10", acct.Email, right)
		requireLimited(t, r.Status, r.Header, r.Detail(t))
		fresh := newWebClient(t, b)
		fresh.ip = "192.0.2.11"
		resp, page = fresh.signIn(acct.Email, right)
		requireLimited(t, resp.StatusCode, resp.Header, page)
		require.NotContains(t, fresh.cookies, "mw_session")

		// The owner's browser still signs in, from wherever it is now.
		owner.ip = "192.0.2.12"
		resp, page = owner.signIn(acct.Email, right)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s", page)
		resp, page = owner.req("GET", "/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, page, acct.Email)
		// Its cookie also passes the token route (a browser sends it).
		r = b.tokenFrom(t, "192.0.2.12", acct.Email, right, owner.cookies["mw_device"])
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		// A forged device cookie is one more unknown client.
		forged := &http.Cookie{Name: "mw_device", Value: strings.Repeat("A", 43)}
		r = b.tokenFrom(t, "192.0.2.13", acct.Email, right, forged)
		requireLimited(t, r.Status, r.Header, r.Detail(t))
		// The owner's success did not reopen the budget for others.
		r = b.tokenFrom(t, "192.0.2.14", acct.Email, right)
		requireLimited(t, r.Status, r.Header, r.Detail(t))

		// Another account is untouched, from the attacker's IPs too.
		r = b.tokenFrom(t, "203.0.113.100", other.Email, right)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})

	t.Run("PasswordChangeForgetsDevices", func(t *testing.T) {
		acct := b.createAccount(t)
		owner := newWebClient(t, b)
		owner.ip = "198.51.100.8"
		resp, _ := owner.signIn(acct.Email, right)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		device := owner.cookies["mw_device"]
		require.NotNil(t, device)
		const next = "a new long password"
		require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", acct.Key, map[string]string{"password": next}).Status)
		for i := range 10 {
			r := b.tokenFrom(t, fmt.Sprintf("203.0.113.%d", 200+i), acct.Email, "wrong password!")
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
		}
		r := b.tokenFrom(t, "198.51.100.8", acct.Email, next, device)
		requireLimited(t, r.Status, r.Header, r.Detail(t))
	})
}
