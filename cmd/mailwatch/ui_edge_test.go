package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/browsertest"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	uiTestUser     = "ops"
	uiTestPassword = "correct horse battery"
)

// uiEdgeFixture is River UI (newUIHandler, behind basic auth) on a loopback
// port, over a fresh database whose jobs the tests create.
type uiEdgeFixture struct {
	t    *testing.T
	base string
	job  func() int64
	// state reads a job's state.
	state func(id int64) string
}

func newUIEdge(t *testing.T) *uiEdgeFixture {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger}, jobs.Options{})
	require.NoError(t, err)
	h, err := newUIHandler(ctx, uiOptions{Pool: pool, Client: client, Logger: logger, User: uiTestUser, Password: uiTestPassword})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &uiEdgeFixture{
		t:    t,
		base: srv.URL,
		// A job due in an hour, which no worker runs: cancel moves it to
		// cancelled, and nothing else does.
		job: func() int64 {
			var id int64
			require.NoError(t, pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
				VALUES ('{}', 'edge_probe', 1, 1, 'edge_probe', 'scheduled', now() + interval '1 hour') RETURNING id`).Scan(&id))
			return id
		},
		state: func(id int64) string {
			var s string
			require.NoError(t, pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE id = $1", id).Scan(&s))
			return s
		},
	}
}

// post sends a state-changing request with basic auth and the given headers.
func (u *uiEdgeFixture) post(method, path string, body []byte, header map[string]string) (int, string, http.Header) {
	u.t.Helper()
	req, err := http.NewRequest(method, u.base+path, bytes.NewReader(body))
	require.NoError(u.t, err)
	req.SetBasicAuth(uiTestUser, uiTestPassword)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(u.t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(u.t, err)
	return resp.StatusCode, string(got), resp.Header
}

func idsBody(id int64) []byte { return []byte(fmt.Sprintf(`{"ids":["%d"]}`, id)) }

// TestRiverUIRefusesCrossSiteActions: River UI's state-changing routes take
// only requests of its own pages (Sec-Fetch-Site, else Origin) and only JSON
// bodies; scripts without a browser's headers pass with application/json.
func TestRiverUIRefusesCrossSiteActions(t *testing.T) {
	t.Parallel()
	u := newUIEdge(t)
	other := strings.Replace(u.base, "127.0.0.1:", "127.0.0.1:1", 1) // another port, another origin

	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
		detail string
	}{
		{"TextPlainWithoutBrowserHeaders", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, "Content-Type: application/json"},
		{"FormFromNoBrowser", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "JSON"},
		{"NoContentType", map[string]string{}, http.StatusUnsupportedMediaType, "JSON"},
		{"CrossSite", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-site"},
		{"SameSiteOtherPort", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-site", "Origin": other}, http.StatusForbidden, "cross-site"},
		{"CrossSiteEvenAsJSON", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-site"},
		{"OtherOriginWithoutSecFetch", map[string]string{"Content-Type": "application/json", "Origin": other}, http.StatusForbidden, "cross-site"},
		{"NullOrigin", map[string]string{"Content-Type": "application/json", "Origin": "null"}, http.StatusForbidden, "cross-site"},
		{"SameOriginForm", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}, http.StatusUnsupportedMediaType, "JSON"},
		{"Gzip", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, http.StatusUnsupportedMediaType, "uncompressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, action := range []string{"cancel", "delete", "retry"} {
				id := u.job()
				body := idsBody(id)
				if tc.header["Content-Encoding"] == "gzip" {
					var b bytes.Buffer
					zw := gzip.NewWriter(&b)
					_, _ = zw.Write(body)
					require.NoError(t, zw.Close())
					body = b.Bytes()
				}
				status, got, hdr := u.post("POST", "/api/jobs/"+action, body, tc.header)
				require.Equal(t, tc.status, status, "%s: %s", action, got)
				require.Contains(t, got, tc.detail)
				if tc.header["Content-Encoding"] != "" {
					require.Equal(t, "identity", hdr.Get("Accept-Encoding"))
				}
				require.Equal(t, "scheduled", u.state(id), "%s was refused: the job is untouched", action)
			}
		})
	}
	t.Run("QueueActionsToo", func(t *testing.T) {
		status, got, _ := u.post("PUT", "/api/queues/edge_probe/pause", nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
		require.Equal(t, http.StatusForbidden, status, got)
		status, got, _ = u.post("PATCH", "/api/queues/edge_probe", []byte(`{"concurrency":null}`), map[string]string{"Content-Type": "text/plain"})
		require.Equal(t, http.StatusUnsupportedMediaType, status, got)
	})

	t.Run("OwnPagesAndScriptsPass", func(t *testing.T) {
		// River UI's frontend posts its JSON as text/plain; the browser
		// marks it same-origin.
		id := u.job()
		status, got, _ := u.post("POST", "/api/jobs/cancel", idsBody(id), map[string]string{
			"Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Site": "same-origin", "Origin": u.base,
		})
		require.Equal(t, http.StatusOK, status, got)
		require.Equal(t, "cancelled", u.state(id))
		// An older browser: no Sec-Fetch-Site, its own Origin, JSON.
		id = u.job()
		status, got, _ = u.post("POST", "/api/jobs/cancel", idsBody(id), map[string]string{"Content-Type": "application/json", "Origin": u.base})
		require.Equal(t, http.StatusOK, status, got)
		require.Equal(t, "cancelled", u.state(id))
		// curl or a script: no browser headers, JSON.
		id = u.job()
		status, got, _ = u.post("POST", "/api/jobs/delete", idsBody(id), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusOK, status, got)
		// Reads are not actions: a cross-site GET is answered (the browser
		// keeps the answer from the other page).
		status, got, hdr := u.post("GET", "/api/jobs?limit=1", nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
		require.Equal(t, http.StatusOK, status, got)
		require.Equal(t, "DENY", hdr.Get("X-Frame-Options"), "no other page frames River UI to click its buttons")
	})

	t.Run("BodiesAreBounded", func(t *testing.T) {
		status, got, _ := u.post("PATCH", "/api/queues/edge_probe", bytes.Repeat([]byte(" "), uiBodyLimit+1), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusRequestEntityTooLarge, status, got)
	})
}

// TestRiverUICrossOriginPageInBrowser is the hostile probe's attack in a real
// browser: the operator's Chromium holds River UI's basic-auth credentials;
// a page of another origin (another loopback port) posts job cancels with
// fetch() and with a text/plain form. The jobs stay scheduled; River UI's
// own page, in the same browser, still cancels one the way its frontend
// does.
func TestRiverUICrossOriginPageInBrowser(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	u := newUIEdge(t)
	viaFetch, viaForm, own := u.job(), u.job(), u.job()

	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>prize</title>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" action="%[1]s/api/jobs/cancel" enctype="text/plain" target="sink">
<input type="hidden" name='{"ids":["%[3]d"],"x":"' value='"}'>
</form>
<script>
async function attack() {
	const out = [];
	try {
		await fetch(%[2]q, {method: "POST", mode: "no-cors", credentials: "include", body: JSON.stringify({ids: ["%[4]d"]})});
		out.push("fetch sent");
	} catch (e) { out.push("fetch failed: " + e); }
	await new Promise(resolve => {
		document.getElementById("sink").addEventListener("load", resolve, {once: true});
		document.getElementById("f").submit();
	});
	out.push("form sent");
	return out.join("; ");
}
</script>`, u.base, u.base+"/api/jobs/cancel", viaForm, viaFetch)
	}))
	t.Cleanup(attacker.Close)
	require.NotEqual(t, u.base, attacker.URL)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first action starts the browser, which lives as long as the
	// context of that call: no timeout on it.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")))
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	eval := func(js string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err, js)
		return s
	}

	// The operator logs in: the browser caches the credentials for River
	// UI's origin and sends them with every later request to it.
	logged := strings.Replace(u.base, "http://", "http://"+uiTestUser+":"+strings.ReplaceAll(uiTestPassword, " ", "%20")+"@", 1)
	run(chromedp.Navigate(logged + "/api/jobs?limit=1"))
	require.Contains(t, eval(`Promise.resolve(document.body.innerText)`), `"data"`, "logged in to River UI")
	run(chromedp.Navigate(u.base + "/api/jobs?limit=1"))
	require.Contains(t, eval(`fetch("/api/jobs?limit=1").then(r => r.status + " " + r.headers.get("content-type"))`), "200",
		"the browser sends the cached credentials by itself")

	// The operator visits the attacker's page.
	run(chromedp.Navigate(attacker.URL + "/"))
	require.Equal(t, "fetch sent; form sent", eval(`attack()`))
	require.Equal(t, "scheduled", u.state(viaFetch), "a cross-origin fetch() cancelled a job")
	require.Equal(t, "scheduled", u.state(viaForm), "a cross-origin text/plain form cancelled a job")

	// River UI's own page cancels, as its frontend does (a string body:
	// text/plain, same-origin).
	run(chromedp.Navigate(u.base + "/api/jobs?limit=1"))
	require.Equal(t, "200", eval(fmt.Sprintf(`fetch("/api/jobs/cancel", {method: "POST", body: JSON.stringify({ids: ["%d"]})}).then(r => String(r.status))`, own)))
	require.Equal(t, "cancelled", u.state(own))
}
