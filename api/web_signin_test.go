package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
