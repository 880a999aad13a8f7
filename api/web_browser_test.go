package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/browsertest"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// browser is one headless Chromium tab on the dashboard at base.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string
	// axe is axe-core's source (scripts/node-deps), run in every page.
	axe string
}

func newBrowser(t *testing.T, base string) *browser {
	path := browsertest.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	dir := filepath.Join("..", ".local", "screenshots")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return &browser{t: t, ctx: ctx, base: base, shot: dir, axe: axeSource(t)}
}

// axeSource reads axe-core as scripts/node-deps installs it. Without node
// or MW_NODE_DEPS the accessibility checks are skipped (with a line saying
// so); when DASHBOARD_TEST_REQUIRED is set (scripts/test), a missing axe-core fails.
func axeSource(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MW_NODE_DEPS")
	if dir == "" {
		dir = filepath.Join("..", ".local", "node-deps")
	}
	src, err := os.ReadFile(filepath.Join(dir, "axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("DASHBOARD_TEST_REQUIRED") != "" {
			t.Fatalf("axe-core is not installed (run scripts/node-deps and export MW_NODE_DEPS): %v", err)
		}
		t.Log("axe-core is not installed: the pages' accessibility is not checked (run scripts/node-deps)")
		return ""
	}
	return string(src)
}

// checkAccessibility runs axe-core in the page: no serious or critical
// violation of WCAG 2.1 A/AA (and axe's best practices).
func (b *browser) checkAccessibility(page string) {
	b.t.Helper()
	if b.axe == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[string](b.axe+`;""`))
	require.NoError(b.t, err)
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
		return r.violations.filter(function (v) { return v.impact === "serious" || v.impact === "critical"; }).map(function (v) {
			return v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(function (n) { return n.target.join(" "); }).join(", ");
		}).join("\n");
	})`, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err)
	require.Empty(b.t, res, "%s: accessibility violations", page)
}

// browserStepBound only keeps a hung browser from hanging the suite: a step
// waits for the page state it needs, and under the race-enabled suite on a
// busy two-core machine that can take far longer than it does alone.
const browserStepBound = 3 * time.Minute

// do runs steps with a bound on how long the browser may take.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err, sel)
	return s
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	require.NoError(b.t, err, js)
	return s
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// docImages are the pages the README shows, written to docs/images/ by a
// run with MW_DOC_IMAGES=1 (TestDocImages checks they are there).
var docImages = map[string]bool{"overview": true, "domain": true}

// screenshots writes the current page at desktop and phone width.
func (b *browser) screenshots(name string) {
	b.t.Helper()
	for _, v := range []struct {
		label string
		w, h  int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
		require.NoError(b.t, chromedp.Do(ctx, chromedp.EmulateViewport(v.w, v.h)))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(b.t, err)
		require.NoError(b.t, os.WriteFile(filepath.Join(b.shot, name+"-"+v.label+".png"), png, 0o644))
		if v.label == "desktop" && docImages[name] && os.Getenv("MW_DOC_IMAGES") != "" {
			// The README's pictures: what a desktop window shows of the page.
			ctx, cancel := context.WithTimeout(b.ctx, browserStepBound)
			shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			cancel()
			require.NoError(b.t, err)
			require.NoError(b.t, os.WriteFile(filepath.Join("..", "docs", "images", name+".png"), shot, 0o644))
		}
		b.checkLayout(name, v.label)
		if v.label == "desktop" {
			b.checkAccessibility(name)
		}
	}
	b.do(chromedp.EmulateViewport(1280, 800))
}

// checkLayout checks what every page's frame owes its reader at the
// viewport just set: a header on one line at desktop width (so its height
// does not jump between pages) and a compact one on a phone, a page form
// before the sign-out form, and on a phone, tables as labelled stacked rows.
func (b *browser) checkLayout(page, viewport string) {
	b.t.Helper()
	if b.eval(`document.querySelector("header.top nav") ? "nav" : ""`) == "" {
		return // signed out, or suspended
	}
	height, err := strconv.Atoi(b.eval(`String(document.querySelector("header.top").offsetHeight)`))
	require.NoError(b.t, err)
	limit := 64 // one line
	if viewport == "phone" {
		limit = 90 // brand and sign-out, then one scrolling line of navigation
	}
	require.LessOrEqual(b.t, height, limit, "%s (%s): the header is %d px tall", page, viewport, height)
	require.Empty(b.t, b.eval(`document.forms.length > 1 && document.forms[0].id === "signout" ? "first" : ""`),
		"%s: the sign-out form comes before the page's forms", page)
	main := b.text("main")
	require.NotRegexp(b.t, `— ·|· —|· ·|- ·`, main, "%s: a separator stands beside an empty field", page)
	require.NotRegexp(b.t, `%!|0xc0|<nil>|map\[`, main, "%s: Go formatting debris in the page", page)
	if viewport == "phone" {
		require.Empty(b.t, b.eval(`Array.from(document.querySelectorAll("table.list tbody td")).filter(function (td) {
			return getComputedStyle(td).display !== "block" || (td.closest("table").querySelector("thead th") && !td.hasAttribute("data-label"));
		}).length ? "unstacked" : ""`), "%s: a table is not stacked rows with labelled cells on a phone", page)
	}
}

// eventuallyPage reloads path until cond holds on it.
func (b *browser) eventuallyPage(path, what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b.open(path)
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// dashboardServer is the API on a committed database with a River worker
// (checks and webhook pushes), a receiver wake-up hub, the loopback DNS
// server's resolver, real SMTP, and a real HTTP listener.
type dashboardServer struct {
	*testBundle
	base string
	smtp string
}

func startDashboard(t *testing.T, zone string, extra func(*api.Deps)) *dashboardServer {
	t.Helper()
	pool, dbURL := dbtest.NewDB(t)
	dnsSrv := dnstest.Start(t, zone)
	resolver := dnscheck.NewClient(dnsSrv.Addr(), 500*time.Millisecond)
	hub := receivers.NewHub(receivers.ConnectURL(dbURL), nil)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	<-hub.Ready()
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) {
			d.Resolver = resolver
			d.Waiters = hub
			if extra != nil {
				extra(d)
			}
		}
	})
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: logger, Keyring: keyring, Resolver: resolver,
		Settings:      jobs.Settings{DNSCheckInterval: time.Hour, EventRetentionDays: 90, HealthHistoryDays: 90},
		WebhookClient: webhook.NewClient(testGuard(t), webhook.ClientOptions{}),
	}, jobs.Options{Concurrency: 10})
	require.NoError(t, err)
	require.NoError(t, worker.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(ctx)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.srv.Shutdown(ctx)
	})
	return &dashboardServer{testBundle: b, base: "http://" + ln.Addr().String(), smtp: startSMTP(t, testStore(t, pool), 0)}
}

var keyPattern = regexp.MustCompile(`^mw_[A-Za-z0-9]{40}$`)

// TestDashboardInBrowser is the dashboard's acceptance test in a real
// headless Chromium: sign up and in, a domain served by the loopback DNS
// server checked by the worker, an alert acknowledged and its audit event,
// a key shown once, a delivery retried, and a message arriving live.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	const domain = "dash-browser.test"
	srv := startDashboard(t, testfactory.GoodZone(domain), nil)
	br := newBrowser(t, srv.base)
	email := strings.ToLower(uniqueEmail(t))
	const password = "correct horse battery"

	// Sign-up shows the first key once, and signs the new account in.
	br.open("/signup")
	br.screenshots("signup")
	br.do(chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#new-key")))
	firstKey := br.eval(`document.querySelector("#new-key input").value`)
	require.Regexp(t, keyPattern, firstKey)
	require.Equal(t, email, br.text(".who"))

	// Sign out, then a wrong password, then the right one.
	br.do(chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#password")))
	br.screenshots("signin")
	br.do(chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), "wrong password!"),
		chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	require.Contains(t, br.text(".problem"), "wrong email or password")
	require.Equal(t, br.eval(`String(document.querySelector("form.narrow").offsetWidth)`), br.eval(`String(document.querySelector(".problem").offsetWidth)`),
		"the sign-in error is as wide as the form")
	br.do(chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS(".tiles")))
	require.Equal(t, "Overview", br.text("h1"))
	require.Equal(t, "200 image/svg+xml", br.eval(`(function () { var x = new XMLHttpRequest();
		x.open("GET", document.querySelector("link[rel=icon]").href, false); x.send();
		return x.status + " " + x.getResponseHeader("Content-Type"); })()`), "every page names a favicon that exists")
	acctID := srv.accountID(t, email)

	// A domain served by the loopback DNS server: its score and checks.
	br.open("/domains")
	br.do(chromedp.SendKeys(chromedp.CSS("#domain"), domain), chromedp.Click(chromedp.CSS("main form button")),
		chromedp.WaitVisible(chromedp.CSS("#score")))
	require.Contains(t, br.text(".notice"), "added")
	br.eventuallyPage("/domains/"+domain, "the first check's score", func() bool {
		return regexp.MustCompile(`^\d+$`).MatchString(br.text("#score"))
	})
	require.Equal(t, "pass", br.eval(`document.querySelector("details.check .st").textContent`), "spf passes")
	require.Contains(t, br.eval(`document.querySelector("details.check").textContent`), "v=spf1", "the spf check's records")
	// The DKIM selector inventory: the check found selector1's key.
	require.Contains(t, br.text("#selectors"), "selector1")
	require.Contains(t, br.text("#selectors"), "ed25519 256")
	// The health chart: titled and described for a screen reader, with its numbers as a table.
	require.Contains(t, br.eval(`document.querySelector("#health-chart svg title").textContent`), "Health score of "+domain)
	require.NotEmpty(t, br.eval(`document.querySelector("#health-chart svg desc").textContent`))
	require.NotEmpty(t, br.eval(`document.querySelector("#health-chart table td") ? "table" : ""`))
	require.Equal(t, br.eval(`String(document.querySelector("#health-chart .chart").getBoundingClientRect().width > document.querySelector("main").clientWidth * 0.9)`), "true",
		"the chart is as wide as the page")
	// An aggregate report uploaded through the API, parsed by the worker:
	// the DMARC charts by source category and pass rate appear.
	report := dmarcReportFor(domain, time.Now().UTC().Truncate(24*time.Hour).Add(-48*time.Hour))
	require.Equal(t, http.StatusAccepted, srv.rptRawDo(t, "POST", "/api/accounts/me/domains/"+domain+"/reports", firstKey, "application/octet-stream", report).Status)
	br.eventuallyPage("/domains/"+domain, "the DMARC charts of the parsed report", func() bool {
		return br.eval(`document.querySelector("#dmarc-chart") ? "y" : ""`) == "y"
	})
	require.Contains(t, br.eval(`document.querySelector("#dmarc-chart svg title").textContent`), "DMARC messages per day by source category")
	require.Equal(t, "4", br.eval(`String(document.querySelectorAll("#dmarc-chart .legend li").length)`), "four categories named")
	require.NotEmpty(t, br.eval(`document.querySelector("#dmarc-pass-chart table td") ? "table" : ""`))
	br.screenshots("domain")
	// A DNS recommendation dismissed with a reason (the domain has no MTA-STS).
	br.do(chromedp.Click(chromedp.CSS("article.rec details.dismiss summary")),
		chromedp.SendKeys(chromedp.CSS("article.rec form.inline input[name=reason]"), "no MTA-STS host yet"),
		chromedp.Click(chromedp.CSS("article.rec form.inline button")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "recommendation dismissed", br.text(".notice"))
	require.Contains(t, br.text("article.rec"), "(dismissed)")
	// Check now; edit the tags and selectors. (The notice of the action
	// before is removed first, so that the wait is for the next page's.)
	br.eval(`document.querySelectorAll(".notice").forEach(function (n) { n.remove(); }); ""`)
	br.do(chromedp.Click(chromedp.CSS(`form[action$="/check"] button`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Regexp(t, `^checked: score \d+$`, br.text(".notice"))
	br.do(chromedp.Click(chromedp.CSS("details.edit summary")))
	br.eval(`document.querySelector("#edit-tags").value = ""; document.querySelectorAll(".notice").forEach(function (n) { n.remove(); }); ""`)
	br.do(chromedp.SendKeys(chromedp.CSS("#edit-tags"), "prod, eu"), chromedp.SendKeys(chromedp.CSS("#edit-selectors"), "s1"),
		chromedp.Click(chromedp.CSS("details.edit button")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "saved", br.text(".notice"))
	require.Contains(t, br.text("main section.card"), "tags prod, eu")
	require.Equal(t, "s1", br.eval(`document.querySelector("#edit-selectors").value`))
	require.Contains(t, br.text("details.check"), "SPF", "checks are named in words")
	// A domain that does not exist says so once, not under every check; then it is deleted.
	nx := "nx." + domain
	br.open("/domains")
	br.do(chromedp.SendKeys(chromedp.CSS("#domain"), nx), chromedp.Click(chromedp.CSS("main form button")),
		chromedp.WaitVisible(chromedp.CSS("#score")))
	br.eventuallyPage("/domains/"+nx, "the first check of a domain that does not exist", func() bool {
		return br.eval(`document.querySelector("#nxdomain") ? "y" : ""`) == "y"
	})
	require.Equal(t, 1, strings.Count(br.text("main"), "does not exist in DNS"), "said once")
	require.Empty(t, br.eval(`document.querySelector("details.check") ? "checks" : ""`))
	br.screenshots("domain-nxdomain")
	br.do(chromedp.Click(chromedp.CSS("details.confirm:not(.edit) summary")), chromedp.Click(chromedp.CSS("details.confirm:not(.edit) button")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, nx+" is no longer monitored", br.text(".notice"))
	require.NotContains(t, br.text("table.list"), nx)
	br.open("/domains")
	require.Contains(t, br.text("table.list"), domain)
	br.screenshots("domains")

	// An alert acknowledged with a note; the audit event shows on the events page.
	// A DNS change of the domain first: the alert names it as a likely cause.
	srv.emit(t, acctID, events.Event{Type: events.TypeDNSRecordChanged, Domain: domain, Payload: map[string]any{"domain": domain, "check": "spf",
		"before": map[string]any{"status": "pass", "records": []string{"v=spf1 -all"}},
		"after":  map[string]any{"status": "warn", "records": []string{"v=spf1 ?all"}}}})
	alert := srv.emit(t, acctID, events.Event{Type: events.TypeHealthScoreChanged, Severity: events.SeverityCritical, Domain: domain})
	br.open("/")
	require.Regexp(t, `1\s+open alerts`, br.text(".tiles"))
	require.Contains(t, br.text(".tiles"), "no mail yet", "no rate without a denominator")
	require.Contains(t, br.text("main"), "No mail in the last 14 days")
	require.Contains(t, br.text("main"), "Health score changed", "an open alert in words")
	br.screenshots("overview")
	br.open("/alerts")
	sel := "#alert-" + alert.ID.String()
	require.Contains(t, br.text(sel+" .causes"), "DNS record changed: "+domain+": SPF record changed: pass → warn", "the likely cause, in words")
	br.screenshots("alerts")
	br.do(chromedp.SendKeys(chromedp.CSS(sel+" input[name=acknowledged_by]"), "alice"),
		chromedp.SendKeys(chromedp.CSS(sel+" input[name=note]"), "DNS provider outage"),
		chromedp.Click(chromedp.CSS(sel+" button")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "alert acknowledged", br.text(".notice"))
	br.open("/alerts?show=acknowledged")
	require.Contains(t, br.text(sel), "alice")
	require.Contains(t, br.text(sel), "DNS provider outage")
	br.open("/events?event_type=alert_acknowledged")
	require.Contains(t, br.text("#events"), "alert_acknowledged")
	// Words, not identifiers: the type's title and what the event says.
	require.Contains(t, br.text("#events li strong"), "Alert acknowledged")
	require.Contains(t, br.text("#events li"), "Health score changed acknowledged by alice: DNS provider outage")
	require.Contains(t, br.eval(`document.querySelector("#events pre").textContent`), `"key_identifier": "dashboard"`)
	br.screenshots("events")
	// The acknowledgement withdrawn; its audit event arrives on the open
	// events page without a reload.
	br.open("/alerts?show=acknowledged")
	br.do(chromedp.Click(chromedp.CSS(sel+" form button")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "acknowledgement withdrawn", br.text(".notice"))
	br.open("/events")
	br.eval(`window.__same_page = "events"`)
	srv.emit(t, acctID, events.Event{Type: events.TypeDMARCReportReceived, Domain: domain})
	br.do(chromedp.WaitVisible(chromedp.CSS("#events li.fresh")))
	require.Contains(t, br.text("#events li.fresh"), "dmarc_report_received")
	require.Contains(t, br.text("#events li.fresh strong"), "DMARC report received", "a live event has the same words")
	require.Equal(t, "events", br.eval(`window.__same_page`), "the page was not reloaded")

	// A key is shown once: a new visit lists it without the key.
	br.open("/settings")
	br.do(chromedp.SendKeys(chromedp.CSS("#label"), "ci"), chromedp.Click(chromedp.CSS("main form.inline button")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")))
	key := br.eval(`document.querySelector("#new-key input").value`)
	require.Regexp(t, keyPattern, key)
	require.Equal(t, 200, srv.do(t, "GET", "/api/accounts/me", key, nil).Status, "the shown key works")
	br.screenshots("settings-new-key")
	br.open("/settings")
	require.Equal(t, "", br.eval(`document.querySelector("#new-key") ? "shown" : ""`))
	require.NotContains(t, br.eval(`document.documentElement.outerHTML`), key)
	require.Contains(t, br.text("#keys"), "ci")

	// Notification preferences: the health group's email switch turned off
	// on the page is what the API answers; required groups cannot change.
	// One form, one Save button for every group.
	require.Equal(t, "true", br.eval(`String(document.querySelector('#group-health input[name="email:health"]').checked)`))
	require.Equal(t, "true", br.eval(`String(document.querySelector("#group-audit input").disabled)`))
	require.Equal(t, "1", br.eval(`String(document.querySelectorAll("#groups-form button").length)`))
	br.eval(`document.querySelectorAll(".notice").forEach(function (n) { n.remove(); }); ""`)
	br.do(chromedp.Click(chromedp.CSS(`#group-health input[name="email:health"]`)), chromedp.Click(chromedp.CSS("#groups-form button")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "preferences saved", br.text(".notice"))
	require.Equal(t, "false", br.eval(`String(document.querySelector('#group-health input[name="email:health"]').checked)`))
	require.Contains(t, br.text("#group-health th"), "Domain health", "groups are named in words")
	var prefs struct {
		Groups []struct {
			Name     string `json:"name"`
			Channels struct {
				Email   bool `json:"email"`
				Webhook bool `json:"webhook"`
			} `json:"channels"`
		} `json:"groups"`
	}
	srv.do(t, "GET", "/api/accounts/me/preferences", key, nil).JSON(t, &prefs)
	var health int
	for i, g := range prefs.Groups {
		if g.Name == "health" {
			health = i
		}
	}
	require.Equal(t, "health", prefs.Groups[health].Name)
	require.False(t, prefs.Groups[health].Channels.Email, "persisted through the API's endpoint")
	require.True(t, prefs.Groups[health].Channels.Webhook)
	// The plan, read-only.
	require.Equal(t, "free", br.text("#plan-name"))
	require.Equal(t, "active", br.text("#billing-status"))
	require.Regexp(t, `Domains\s+1\s+\d+`, br.text("#plan-usage"))
	br.open("/settings")
	br.screenshots("settings")

	// A sending provider connected through the form: the answer leads with
	// its ingress URL and setup steps; the signing key is not in the page.
	br.open("/providers")
	const mgKey = "key-browser-0123456789abcdef"
	visibleKinds := `Array.from(document.querySelectorAll("fieldset[data-kind]")).filter(function (f) { return !f.hidden; }).map(function (f) { return f.getAttribute("data-kind"); }).join(",")`
	require.Equal(t, "ses", br.eval(visibleKinds), "only the chosen kind's fields show")
	br.eval(`var k = document.querySelector("#kind"); k.value = "mailgun"; k.dispatchEvent(new Event("change")); ""`)
	require.Equal(t, "mailgun", br.eval(visibleKinds))
	br.do(chromedp.SendKeys(chromedp.CSS("#provider-label"), "Mailgun EU"),
		chromedp.SendKeys(chromedp.CSS("#signing_key"), mgKey), chromedp.Click(chromedp.CSS("#create-provider button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#created-provider")))
	require.Contains(t, br.eval(`document.querySelector("#ingress-url").value`), "/api/webhooks/providers/")
	require.Contains(t, br.text("#setup-steps"), "Mailgun")
	require.NotContains(t, br.eval(`document.documentElement.outerHTML`), mgKey)
	br.screenshots("providers")
	br.open("/dns-connections")
	require.Contains(t, br.text("#create-connection"), "Connect a DNS provider")
	require.Equal(t, "rfc2136", br.eval(visibleKinds), "only the chosen kind's fields show")
	br.screenshots("dns-connections")

	// The verification mail's link: the page verifies only on its button.
	br.do(chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#password")))
	var addrID string
	require.NoError(t, srv.db.QueryRow(context.Background(), `SELECT id::text FROM notification_addresses WHERE account_id = $1`, acctID).Scan(&addrID))
	token := srv.newToken(t, addrID)
	br.open("/notifications/verify?token=" + url.QueryEscape(token))
	br.screenshots("verify")
	br.do(chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#verified")))
	require.Contains(t, br.text("#verified"), email+" is verified")
	var verified bool
	require.NoError(t, srv.db.QueryRow(context.Background(), `SELECT verified_at IS NOT NULL FROM notification_addresses WHERE id = $1`, addrID).Scan(&verified))
	require.True(t, verified)
	br.open("/signin")
	br.do(chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS(".tiles")))

	// The alert mail's link: the page marks the alert and moves to it.
	br.open("/alerts?event=" + alert.ID.String())
	require.Equal(t, "alert-"+alert.ID.String(), br.eval(`document.activeElement.id`))
	require.Equal(t, "true", br.eval(`String(document.querySelector("`+sel+`").classList.contains("target"))`))

	// A subscription created here; its delivery is retried from the delivery page.
	hooks := newPushReceiver(t)
	br.open("/subscriptions")
	// A refused form says why once and keeps what was typed and checked;
	// the type search narrows the checkboxes.
	br.do(chromedp.SendKeys(chromedp.CSS("#url"), "http://169.254.169.254/hook"), chromedp.SendKeys(chromedp.CSS("#type-filter"), "score"))
	require.Equal(t, "1", br.eval(`String(Array.from(document.querySelectorAll("#event-types .type-group label")).filter(function (l) { return !l.hidden; }).length)`))
	br.do(chromedp.Click(chromedp.CSS(`input[value="health_score_changed"]`)), chromedp.SendKeys(chromedp.CSS("#domain_filter"), domain),
		chromedp.Click(chromedp.CSS("#create-subscription button")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	problem := br.text(".problem")
	require.Equal(t, 1, strings.Count(problem, "169.254.169.254"), "the refusal is said once: %s", problem)
	require.Contains(t, problem, "use a public host name")
	require.Equal(t, "http://169.254.169.254/hook", br.eval(`document.querySelector("#url").value`))
	require.Equal(t, domain, br.eval(`document.querySelector("#domain_filter").value`))
	require.Equal(t, "true", br.eval(`String(document.querySelector('input[value="health_score_changed"]').checked)`))
	br.eval(`document.querySelector("#url").value = ""; document.querySelector("#domain_filter").value = "";
		document.querySelector('input[value="health_score_changed"]').checked = false; ""`)
	br.do(chromedp.SendKeys(chromedp.CSS("#url"), hooks.URL+"/hook"), chromedp.Click(chromedp.CSS("#create-subscription button")),
		chromedp.WaitVisible(chromedp.CSS(".secret")))
	require.Contains(t, br.eval(`document.querySelector("#secret").value`), "whsec_")
	br.do(chromedp.Click(chromedp.CSS("article form button")), chromedp.WaitVisible(chromedp.CSS("#test-result")))
	require.Contains(t, br.text("#test-result"), "delivered")
	// The secret rotated with an overlap: the new one is shown once, and the
	// card says the old one still signs.
	oldSecret := br.eval(`document.querySelector("#secret") ? document.querySelector("#secret").value : ""`)
	br.do(chromedp.Click(chromedp.CSS("details.rotate summary")), chromedp.Click(chromedp.CSS("details.rotate button")),
		chromedp.WaitVisible(chromedp.CSS("#rotated")))
	newSecret := br.eval(`document.querySelector("#new-secret").value`)
	require.Contains(t, newSecret, "whsec_")
	require.NotEqual(t, oldSecret, newSecret)
	require.Contains(t, br.text("#rotated"), "signature under the old secret too")
	require.Contains(t, br.text("main article"), "rotating")
	br.screenshots("subscriptions")
	// Failed deliveries of a range pushed again: the recovery is queued,
	// and asking again while it is queued says so.
	br.do(chromedp.Click(chromedp.CSS("details.recover summary")), chromedp.Click(chromedp.CSS("details.recover button")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Contains(t, br.text(".notice"), "recovery queued (job ")
	var recoverJobs int
	require.NoError(t, srv.db.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'webhook_recover'`).Scan(&recoverJobs))
	require.Equal(t, 1, recoverJobs)
	srv.emit(t, acctID, events.Event{Type: events.TypeDMARCReportReceived, Domain: domain})
	br.eventuallyPage("/deliveries?status=delivered", "the delivery", func() bool {
		return br.eval(`document.querySelector("table.list a") ? "y" : ""`) == "y"
	})
	require.Contains(t, br.text("table.list"), hooks.URL+"/hook", "the listing names each delivery's destination")
	br.screenshots("deliveries")
	br.do(chromedp.Click(chromedp.CSS("table.list a")), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	require.Equal(t, "1", br.text("#attempts"))
	path := br.eval(`location.pathname`)
	br.do(chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "retry queued", br.text(".notice"))
	br.eventuallyPage(path, "the retried attempt", func() bool { return br.text("#attempts") == "2" })
	require.Contains(t, br.text("#destination"), hooks.URL+"/hook", "the delivery names where it went")
	require.Regexp(t, `\d:\d\d:\d\d`, br.text("table.list td"), "attempts are timed to the second")
	br.screenshots("delivery")
	// The subscription deleted, after a confirmation.
	br.open("/subscriptions")
	br.do(chromedp.Click(chromedp.CSS("details.delete summary")), chromedp.Click(chromedp.CSS("details.delete button")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Equal(t, "subscription deleted", br.text(".notice"))
	require.Contains(t, br.text("main"), "No subscriptions yet.")

	// A receiver: a message sent over real SMTP appears without a reload.
	br.open("/receivers")
	br.do(chromedp.SendKeys(chromedp.CSS("#label"), "signup codes"), chromedp.Click(chromedp.CSS("main form button")),
		chromedp.WaitVisible(chromedp.CSS("#messages")))
	address := br.eval(`document.querySelector("main .card input").value`)
	require.Contains(t, address, "@")
	br.eval(`window.__same_page = "yes"`)
	require.NoError(t, sendMail(srv.smtp, "noreply@example.com", []string{address},
		"From: App <noreply@example.com>\r\nTo: "+address+"\r\nSubject: Your code\r\n\r\nYour code is 482913. Open https://example.com/verify?c=482913\r\n"))
	br.do(chromedp.WaitVisible(chromedp.CSS("#messages li.fresh")))
	require.Contains(t, br.text("#messages"), "Your code")
	require.Contains(t, br.text("#messages"), "482913")
	require.Equal(t, "yes", br.eval(`window.__same_page`), "the page was not reloaded")
	br.screenshots("receiver")
	br.do(chromedp.Click(chromedp.CSS("#messages li.fresh a")), chromedp.WaitVisible(chromedp.CSS(".code")))
	require.Equal(t, "482913", br.text(".code"))
	require.Contains(t, br.text("main"), "https://example.com/verify?c=482913")
	br.screenshots("message")
	// The worker's analysis job judges the message: once it ran, the page
	// shows the grade, the verdicts and the findings.
	msgPath := br.eval(`location.pathname`)
	br.eventuallyPage(msgPath, "the message's analysis", func() bool {
		return br.eval(`document.querySelector(".grade") ? "yes" : "no"`) == "yes"
	})
	require.Contains(t, br.text("table.verdicts"), "SPF (MAIL FROM)")
	require.Contains(t, br.text("ul.findings"), "Fix: ")
	br.screenshots("message-analysis")
	br.open("/receivers")
	require.Contains(t, br.eval(`document.querySelector("#receiver-chart svg title").textContent`), "Messages received per day")
	require.NotEmpty(t, br.eval(`document.querySelector("#receiver-chart table td") ? "table" : ""`))
	br.screenshots("receivers")

	// Times are shown in the viewer's zone: the script replaced the UTC text.
	require.NotContains(t, br.eval(`document.querySelector("time").textContent`), "UTC")
}

// accountID reads an account's id by email.
func (b *testBundle) accountID(t *testing.T, email string) string {
	var id string
	require.NoError(t, b.db.QueryRow(context.Background(), `SELECT id::text FROM accounts WHERE email = $1`, email).Scan(&id))
	return id
}

// signedInClient signs in over HTTP like a browser, keeping the cookies.
func signedInClient(t *testing.T, base, email, password string) (*http.Client, string, *http.Response) {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/signin")
	require.NoError(t, err)
	resp.Body.Close()
	var pre string
	u, _ := url.Parse(base)
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "mw_csrf" {
			pre = ck.Value
		}
	}
	require.NotEmpty(t, pre)
	req, _ := http.NewRequest("POST", base+"/signin", strings.NewReader(url.Values{"csrf": {pre}, "email": {email}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	signIn, err := c.Do(req)
	require.NoError(t, err)
	signIn.Body.Close()
	require.Equal(t, http.StatusSeeOther, signIn.StatusCode)
	resp, err = c.Get(base + "/settings")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`data-csrf="([^"]+)"`).FindSubmatch(page)
	require.NotNil(t, m, "%s", page)
	return c, string(m[1]), signIn
}

// TestDashboardCSRF: a cross-site form post is refused (in the browser, from
// a page on another origin), as are posts with a wrong or missing token or a
// foreign Origin; the session cookie is HttpOnly, SameSite=Lax, and Secure
// when the public URL is https.
func TestDashboardCSRF(t *testing.T) {
	t.Parallel()
	srv := startDashboard(t, testfactory.GoodZone("csrf.test"), nil)
	acct := srv.createAccount(t)
	c, token, signIn := signedInClient(t, srv.base, acct.Email, "correct horse battery")

	t.Run("CookieFlags", func(t *testing.T) {
		var set string
		for _, v := range signIn.Header.Values("Set-Cookie") {
			if strings.HasPrefix(v, "mw_session=") {
				set = v
			}
		}
		require.NotEmpty(t, set)
		require.Contains(t, set, "HttpOnly")
		require.Contains(t, set, "SameSite=Lax")
		require.NotContains(t, set, "Secure", "plain http on loopback")

		tls := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.PublicBaseURL = "https://mailwatch.example" } })
		req := httptest.NewRequest("GET", "/signin", nil)
		resp, err := tls.srv.App().Test(req, -1)
		require.NoError(t, err)
		pre := resp.Cookies()[0]
		require.True(t, pre.Secure && pre.HttpOnly && pre.SameSite == http.SameSiteLaxMode, "%+v", pre)
		a := tls.createAccount(t)
		req = httptest.NewRequest("POST", "/signin", strings.NewReader(url.Values{"csrf": {pre.Value}, "email": {a.Email}, "password": {"correct horse battery"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(pre)
		resp, err = tls.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		var session *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "mw_session" {
				session = ck
			}
		}
		require.NotNil(t, session)
		require.True(t, session.Secure && session.HttpOnly && session.SameSite == http.SameSiteLaxMode, "%+v", session)
	})

	keys := func() int {
		var list []map[string]any
		resp := srv.do(t, "GET", "/api/accounts/me/api-keys", acct.Key, nil)
		resp.JSON(t, &list)
		return len(list)
	}
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", srv.base+"/settings/api-keys", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("TokenAndOrigin", func(t *testing.T) {
		before := keys()
		require.Equal(t, http.StatusForbidden, post(url.Values{"label": {"a"}}, srv.base), "no token")
		wrong := "x" + token[1:] // one character off (a token may start with x)
		if token[0] == 'x' {
			wrong = "y" + token[1:]
		}
		require.Equal(t, http.StatusForbidden, post(url.Values{"label": {"b"}, "csrf": {wrong}}, srv.base), "wrong token")
		require.Equal(t, http.StatusForbidden, post(url.Values{"label": {"c"}, "csrf": {token}}, "http://evil.example"), "foreign origin")
		require.Equal(t, before, keys(), "nothing was created")
		require.Equal(t, http.StatusCreated, post(url.Values{"label": {"d"}, "csrf": {token}}, srv.base), "the real form works")
		require.Equal(t, before+1, keys())
	})

	t.Run("CrossSiteFormInBrowser", func(t *testing.T) {
		// The browser is signed in; a page of another origin posts a form to
		// the dashboard, as an attacker's page would.
		br := newBrowser(t, srv.base)
		br.open("/signin")
		br.do(chromedp.SendKeys(chromedp.CSS("#email"), acct.Email), chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery"),
			chromedp.Click(chromedp.CSS("main button[type=submit]")), chromedp.WaitVisible(chromedp.CSS(".tiles")))
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id="f" method="post" action="%s/settings/api-keys"><input name="label" value="evil"><input name="csrf" value="guess"></form>
<script>document.getElementById("f").submit()</script>`, srv.base)
		}))
		t.Cleanup(evil.Close)
		before := keys()
		br.do(chromedp.Navigate(evil.URL), chromedp.WaitReady(chromedp.CSS("body")))
		require.Eventually(t, func() bool {
			return strings.Contains(br.eval(`document.body.innerText`), "cross-site request refused")
		}, 20*time.Second, 100*time.Millisecond)
		require.Equal(t, before, keys())
	})
}
