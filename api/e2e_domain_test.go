package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// pushed is one webhook push the loopback receiver accepted.
type pushed struct {
	Header http.Header
	Body   []byte
	Event  struct {
		Type string `json:"type"`
		Data struct {
			ID        string         `json:"id"`
			EventType string         `json:"event_type"`
			Severity  string         `json:"severity"`
			Domain    *string        `json:"domain"`
			Tags      []string       `json:"tags"`
			Payload   map[string]any `json:"payload"`
		} `json:"data"`
	}
}

// pushReceiver is a customer's webhook endpoint on loopback.
type pushReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	pushes []pushed
}

func newPushReceiver(t *testing.T) *pushReceiver {
	rc := &pushReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p := pushed{Header: r.Header.Clone(), Body: body}
		if err := json.Unmarshal(body, &p.Event); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.pushes = append(rc.pushes, p)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *pushReceiver) byType(eventType string) []pushed {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []pushed
	for _, p := range rc.pushes {
		if p.Event.Type == eventType {
			out = append(out, p)
		}
	}
	return out
}

// eventually polls cond until it holds or the wait (bounded, for an event
// that has to happen) runs out.
func eventually(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting after %s: %s", wait, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDomainEndToEnd is the acceptance test of the domains issue: a domain
// created through the API is checked by a real River worker, its DNS
// changes on the test server, the periodic scheduler's check notices, and
// dns_record_changed and health_score_changed are emitted, pushed (signed)
// to a subscription's loopback endpoint, listed as alerts and acknowledged.
func TestDomainEndToEnd(t *testing.T) {
	t.Parallel()
	const name = "e2e-domain.test"
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	dnsSrv := dnstest.Start(t, testfactory.GoodZone(name))
	resolver := dnscheck.NewClient(dnsSrv.Addr(), 500*time.Millisecond)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32)) // the harness's key
	require.NoError(t, err)

	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.Resolver = resolver }
	})

	// The worker process: every queue, the periodic jobs, a 2 s check
	// interval so the scheduler runs within the test.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	worker, err := jobs.NewClient(jobs.Deps{
		Pool:          pool,
		Logger:        logger,
		Settings:      jobs.Settings{DNSCheckInterval: 2 * time.Second, EventRetentionDays: 90, HealthHistoryDays: 90},
		Keyring:       keyring,
		WebhookClient: webhook.NewClient(testGuard(t), webhook.ClientOptions{}),
		Resolver:      resolver,
	}, jobs.Options{Concurrency: 10, WithPeriodic: true})
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(stopCtx)
	})

	acct := b.createAccount(t)
	receiver := newPushReceiver(t)
	resp := b.do(t, "POST", "/api/accounts/me/event-subscriptions", acct.Key, map[string]any{
		"url":           receiver.URL + "/hooks/mailwatch",
		"event_types":   []string{"dns_record_changed", "health_score_changed"},
		"domain_filter": name,
		"tag_filter":    "prod",
	})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var sub struct {
		SigningSecret string `json:"signing_secret"`
	}
	resp.JSON(t, &sub)

	// Created through the API; its first check runs on the worker.
	createDomain(t, b, acct.Key, name, "prod")
	var first api.DomainDetail
	eventually(t, 30*time.Second, "the first check to be scored", func() bool {
		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil)
		resp.JSON(t, &first)
		return first.Score != nil
	})
	require.Equal(t, 80, *first.Score)
	require.Equal(t, "pass", first.Checks["spf"])
	require.Empty(t, receiver.byType("dns_record_changed"), "the first check is a baseline")

	// The SPF record disappears; the periodic check notices.
	dnsSrv.Remove(name+".", dns.TypeTXT)
	eventually(t, 60*time.Second, "both events to be pushed to the subscription", func() bool {
		return len(receiver.byType("dns_record_changed")) > 0 && len(receiver.byType("health_score_changed")) > 0
	})
	var schedules int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'domain_check_schedule' AND state = 'completed'").Scan(&schedules))
	require.Positive(t, schedules, "the periodic scheduler queued the check that noticed")

	changed := receiver.byType("dns_record_changed")
	require.Len(t, changed, 1)
	ev := changed[0].Event.Data
	require.Equal(t, "dns_record_changed", ev.EventType)
	require.Equal(t, "critical", ev.Severity)
	require.Equal(t, name, *ev.Domain)
	require.Equal(t, []string{"prod"}, ev.Tags)
	require.Equal(t, "spf", ev.Payload["check"])
	require.Equal(t, map[string]any{"status": "pass", "records": []any{"v=spf1 mx ip4:192.0.2.0/24 -all"}}, ev.Payload["before"])
	require.Equal(t, map[string]any{"status": "none", "records": []any{}}, ev.Payload["after"])

	// The push is signed with the subscription's secret (Standard Webhooks).
	h := changed[0].Header
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	sig, err := webhook.Sign(sub.SigningSecret, h.Get("webhook-id"), time.Unix(ts, 0), changed[0].Body)
	require.NoError(t, err)
	require.Equal(t, sig, h.Get("webhook-signature"))

	scored := receiver.byType("health_score_changed")
	require.Len(t, scored, 1)
	hs := scored[0].Event.Data
	require.Equal(t, "critical", hs.Severity, "a fall of 20 points is critical")
	require.EqualValues(t, 80, hs.Payload["previous_score"])
	require.EqualValues(t, 60, hs.Payload["score"])
	require.EqualValues(t, -20, hs.Payload["delta"])

	// Both are alerts; acknowledge the DNS one.
	listAlerts := func(query string) map[string]bool {
		resp := b.do(t, "GET", "/api/accounts/me/alerts"+query, acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var alerts []struct {
			ID        string `json:"id"`
			EventType string `json:"event_type"`
		}
		resp.JSON(t, &alerts)
		ids := map[string]bool{}
		for _, a := range alerts {
			ids[a.ID] = true
		}
		return ids
	}
	open := listAlerts("?acknowledged=false")
	require.True(t, open[ev.ID], "the dns_record_changed alert is listed")
	require.True(t, open[hs.ID], "the health_score_changed alert is listed")

	resp = b.do(t, "POST", "/api/accounts/me/alerts/"+ev.ID+"/acknowledge", acct.Key, map[string]any{
		"acknowledged_by": "oncall@example.com", "note": "SPF record deleted by a DNS migration; restored",
	})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.False(t, listAlerts("?acknowledged=false")[ev.ID])
	require.True(t, listAlerts("?acknowledged=true")[ev.ID])
	require.True(t, listAlerts("?acknowledged=false")[hs.ID], "the other alert is still open")

	// The domain shows the new state, and its history both scores.
	resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health", acct.Key, nil)
	var hist []api.HealthEntry
	resp.JSON(t, &hist)
	require.GreaterOrEqual(t, len(hist), 2)
	require.Equal(t, 60, hist[0].Score)
}
