package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestAPIAnswers503WhenPostgresFreezes: Postgres frozen (SIGSTOP: its
// kernel still accepts and acknowledges TCP, nothing answers) under an API
// whose pool is warm. A request with a cached key, whose handler's
// statement goes out on an already-open connection, answers 503 with
// Retry-After and a detail naming the database, bounded by
// DB_STATEMENT_TIMEOUT, not by REQUEST_TIMEOUT (ten minutes here, longer
// than the test's own deadline: a hang would fail the test). The outage is
// logged once, and the API serves again once Postgres thaws.
func TestAPIAnswers503WhenPostgresFreezes(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.NewDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := newTCPProxy(t, u.Host)
	t.Cleanup(proxy.thaw)
	u.Host = proxy.addr
	addr := freeAddr(t)
	p := startProcess(t, append(baseEnv(u.String()), "LISTEN_ADDR="+addr, "REQUEST_TIMEOUT=10m",
		"DB_STATEMENT_TIMEOUT=1s", "DB_MAX_CONNS=4", "LOG_LEVEL=info"), "api")
	base := "http://" + addr
	waitHTTP(t, base+"/readyz")

	c := fleetClient{t}
	var acct struct {
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	c.json("POST", base+"/api/accounts", "", map[string]string{"email": "frozen@example.com", "password": "a long frozen password"}, 201, &acct)
	key := acct.APIKey.Key
	for range 5 { // the key is cached, the pool warm
		c.json("GET", base+"/api/accounts/me", key, nil, 200, nil)
	}
	// A dashboard session, signed in through the form as a browser would.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 5 * time.Minute}
	page := func(method, path string, form url.Values) (*http.Response, string) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, base+path, body)
		require.NoError(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", base)
		}
		resp, err := browser.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	_, signin := page("GET", "/signin", nil)
	csrf := regexp.MustCompile(`data-csrf="([^"]+)"`).FindStringSubmatch(signin)
	require.NotNil(t, csrf, signin)
	resp, overview := page("POST", "/signin", url.Values{"csrf": {csrf[1]}, "email": {"frozen@example.com"}, "password": {"a long frozen password"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, overview)
	require.Contains(t, overview, "frozen@example.com", "signed in")

	proxy.freeze()
	t.Log("postgres frozen")
	client := &http.Client{Timeout: 5 * time.Minute} // fails the test instead of hanging it
	for i := range 3 {
		req, err := http.NewRequest("GET", base+"/api/accounts/me", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		require.NoError(t, err, "request %d came back", i)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "request %d: %s", i, body)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		var eb struct {
			Detail string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal(body, &eb), "%s", body)
		require.Contains(t, eb.Detail, "database", "the detail names the database, not the request deadline")
	}
	// The dashboard answers the same outage with its error page: 503 with
	// Retry-After and the database named, not "something went wrong".
	resp, body := page("GET", "/domains", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, "the database")
	require.NotContains(t, body, "something went wrong")
	require.Equal(t, 1, strings.Count(p.log(), "database unavailable"), "the frozen database is one outage:\n%s", p.log())

	proxy.thaw()
	t.Log("postgres thawed")
	require.Eventually(t, func() bool {
		resp, _ := c.do("GET", base+"/api/accounts/me", key, nil)
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "the API serves again after the thaw:\n%s", p.log())
	require.Eventually(t, func() bool { return strings.Count(p.log(), "database reachable again") == 1 },
		10*time.Second, 50*time.Millisecond, p.log())
	require.NotContains(t, p.log(), `"status":500`)
}
