package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// scrapeNames returns the metric names a /metrics endpoint exposes (with the
// _bucket, _sum and _count series of histograms).
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(line)] = true
	}
	return names
}

// metricRef finds metric names in PromQL: ours and the Go client's
// process and runtime metrics. `up` is Prometheus's own per-target series.
var metricRef = regexp.MustCompile(`\b(?:mailwatch|process|go)_[a-z0-9_]+\b|\bup\{`)

// TestAlertRulesAndDashboardUseLiveMetrics loads deploy/prometheus/alerts.yml
// and deploy/grafana/mailwatch.json and checks every metric they query
// against live scrapes of a real worker (which has delivered webhooks and
// run its periodic jobs) and a real API (which has answered requests).
func TestAlertRulesAndDashboardUseLiveMetrics(t *testing.T) {
	t.Parallel()
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(rc.Close)
	f := newHookFixture(t, rc.URL)
	f.emit(t, 20)

	w := startProcess(t, f.workerEnv(t), "worker")
	workerOps := ""
	for _, kv := range w.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "METRICS_ADDR="); ok {
			workerOps = v
		}
	}
	apiAddr := freeAddr(t)
	startProcess(t, append(baseEnv(f.url), "LISTEN_ADDR="+apiAddr), "api")
	waitHTTP(t, "http://"+apiAddr+"/healthz")
	resp, err := http.Get("http://" + apiAddr + "/api/accounts/me") // 401: a labelled request series
	require.NoError(t, err)
	resp.Body.Close()
	require.Eventually(t, func() bool {
		return f.count(t, "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'") == 20
	}, 60*time.Second, 100*time.Millisecond, "deliveries:\n%s", w.log())
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + workerOps + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond)

	live := scrapeNames(t, "http://"+workerOps+"/metrics")
	for n := range scrapeNames(t, "http://"+apiAddr+"/metrics") {
		live[n] = true
	}
	live["up{"] = true // Prometheus adds `up` for every target it scrapes

	for _, q := range metricQueries(t) {
		refs := metricRef.FindAllString(q.expr, -1)
		require.NotEmpty(t, refs, "%s queries no known metric: %s", q.where, q.expr)
		for _, name := range refs {
			require.True(t, live[name], "%s uses %s, which no live scrape shows (expr: %s)", q.where, name, q.expr)
		}
	}

	var ours []string
	for n := range live {
		if strings.HasPrefix(n, "mailwatch_river") || strings.HasPrefix(n, "mailwatch_worker") {
			ours = append(ours, n)
		}
	}
	sort.Strings(ours)
	t.Logf("River metrics in the worker's scrape: %s", strings.Join(ours, " "))
}

// metricQuery is one PromQL expression of the shipped alert rules or the
// Grafana dashboard, and where it is.
type metricQuery struct{ where, expr string }

// metricQueries reads deploy/prometheus/alerts.yml and
// deploy/grafana/mailwatch.json, checking that the alerts operators rely on
// exist and that every panel queries something.
func metricQueries(t *testing.T) []metricQuery {
	t.Helper()
	var out []metricQuery
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			alerts[r.Alert] = true
			out = append(out, metricQuery{"alert " + r.Alert, r.Expr})
		}
	}
	for _, a := range []string{"MailwatchQueueBacklogOld", "MailwatchJobsStuckRunning", "MailwatchWebhookFailureRate", "MailwatchNoRiverLeader", "MailwatchScrapeFailing"} {
		require.True(t, alerts[a], "alerts.yml lacks %s", a)
	}

	raw, err = os.ReadFile("../../deploy/grafana/mailwatch.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			out = append(out, metricQuery{"panel " + p.Title, tg.Expr})
		}
	}
	return out
}

// TestDevServesEveryMetric: `mailwatch dev` (what scripts/run runs) is the
// API, the worker and the SMTP listener in one process, so its one /metrics
// carries every series the shipped alerts and dashboard query, River's and
// the webhook workers' included, not only the API's.
func TestDevServesEveryMetric(t *testing.T) {
	t.Parallel()
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(rc.Close)
	f := newHookFixture(t, rc.URL)
	f.emit(t, 5)
	apiAddr := freeAddr(t)
	dev := startProcess(t, append(f.workerEnv(t), "LISTEN_ADDR="+apiAddr, "SMTP_ADDR="+freeAddr(t), "UI_ADDR="+freeAddr(t)), "dev")
	waitHTTP(t, "http://"+apiAddr+"/healthz")
	resp, err := http.Get("http://" + apiAddr + "/api/accounts/me") // 401: a labelled request series
	require.NoError(t, err)
	resp.Body.Close()
	require.Eventually(t, func() bool {
		return f.count(t, "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'") == 5
	}, 60*time.Second, 100*time.Millisecond, "deliveries:\n%s", dev.log())

	// The job series appear once the observer has seen River's events and
	// sampled its queues; wait for that state rather than for a time.
	var live map[string]bool
	missing := func() []string {
		live = scrapeNames(t, "http://"+apiAddr+"/metrics")
		live["up{"] = true
		var out []string
		for _, q := range metricQueries(t) {
			for _, name := range metricRef.FindAllString(q.expr, -1) {
				if !live[name] {
					out = append(out, q.where+": "+name)
				}
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(missing()) == 0 }, 60*time.Second, 200*time.Millisecond,
		"dev's /metrics lacks: %v\n%s", missing(), dev.log())
	require.True(t, live["mailwatch_river_leader"], "River's series are in dev's scrape")
	require.True(t, live["mailwatch_http_requests_total"], "and the API's")
}
