package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// sendgridBatch builds a SendGrid Event Webhook body of n events.
func sendgridBatch(t *testing.T, prefix string, n int, event func(i int) map[string]any) []byte {
	evs := make([]map[string]any, n)
	now := time.Now().Unix()
	for i := range evs {
		e := event(i)
		e["sg_event_id"] = fmt.Sprintf("%s-%d", prefix, i)
		e["sg_message_id"] = fmt.Sprintf("%s-msg-%d.filter", prefix, i)
		e["timestamp"] = now
		evs[i] = e
	}
	b, err := json.Marshal(evs)
	require.NoError(t, err)
	return b
}

// TestBounceSpikeFromRealisticStream sends 10,000 recipients over three
// domains (each through its own SendGrid provider), then a burst of hard
// bounces on one of them: exactly one bounce_spike is raised, for that
// domain, critical (so an alert), and delivered to a subscription; the other
// domains, one with a normal 1% bounce rate and soft bounces, raise nothing.
// Evaluating again raises nothing more (one event per episode).
func TestBounceSpikeFromRealisticStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(hook.Close)
	resp := b.do(t, "POST", "/api/accounts/me/event-subscriptions", a.Key, map[string]any{"url": hook.URL, "event_types": []string{"bounce_spike"}})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var sub struct {
		ID string `json:"id"`
	}
	resp.JSON(t, &sub)

	sends := map[string]int{"spiky.example": 4000, "steady.example": 3000, "quiet.example": 3000}
	prov := map[string]providerJSON{}
	keys := map[string]sendgridKey{}
	for domain, n := range sends {
		b.addDomain(t, a.Key, domain)
		k := newSendgridKey(t)
		p := b.createProvider(t, a.Key, "sendgrid", "sg-"+domain, map[string]any{"public_key": k.pub})
		require.Equal(t, http.StatusOK, b.do(t, "POST", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": domain}).Status)
		prov[domain], keys[domain] = p, k
		for batch := 0; batch < n/1000; batch++ {
			body := sendgridBatch(t, fmt.Sprintf("%s-sent-%d", domain, batch), 1000, func(i int) map[string]any {
				return map[string]any{"event": "processed", "email": fmt.Sprintf("user%d-%d@rcpt.example", batch, i)}
			})
			r := b.ingress(t, p.ID, body, k.headers(t, body))
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
	}
	post := func(domain, prefix string, n int, event func(i int) map[string]any) {
		body := sendgridBatch(t, prefix, n, event)
		r := b.ingress(t, prov[domain].ID, body, keys[domain].headers(t, body))
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	// Normal life on steady.example: 1% hard bounces, some soft ones.
	post("steady.example", "steady-hard", 30, func(i int) map[string]any {
		return map[string]any{"event": "bounce", "type": "bounce", "status": "5.1.1", "email": fmt.Sprintf("user0-%d@rcpt.example", i)}
	})
	post("steady.example", "steady-soft", 200, func(i int) map[string]any {
		return map[string]any{"event": "bounce", "type": "blocked", "status": "4.7.1", "email": fmt.Sprintf("user1-%d@rcpt.example", i)}
	})
	// The burst: 15% of spiky.example's recipients hard-bounce.
	post("spiky.example", "burst", 600, func(i int) map[string]any {
		return map[string]any{"event": "bounce", "type": "bounce", "status": "5.1.1", "email": fmt.Sprintf("user%d-%d@rcpt.example", i%4, i)}
	})
	b.normaliseAll(t)
	require.Equal(t, 10000, b.count(t, `SELECT count(*) FROM message_events WHERE event_type = 'sent'`))

	ctx := context.Background()
	tx := b.db.(pgx.Tx)
	client := insertClient(t)
	domainID := func(name string) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM domains WHERE name = $1`, name).Scan(&id))
		return id
	}
	// The scheduler asks for one spike check per active domain. The rows'
	// received_at is the test transaction's now(), which was taken when the
	// test began (over a minute ago on a loaded machine), so "the last
	// minute" is counted on that clock.
	var txNow time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&txNow))
	n, err := providers.ScheduleSpikeChecks(ctx, tx, client, txNow.Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, 3, b.count(t, `SELECT count(DISTINCT args->>'domain_id') FROM river_job WHERE kind = 'message_spike_check'`))
	for round := 0; round < 2; round++ {
		for domain := range sends {
			_, err := providers.CheckMessageSpikes(ctx, tx, client, domainID(domain), time.Now().Add(time.Second), domains.HealthArgs{DomainID: domainID(domain)})
			require.NoError(t, err)
		}
	}
	var spikes []struct {
		Domain, Severity string
		Payload          map[string]any
	}
	rows, err := tx.Query(ctx, `SELECT domain, severity, payload FROM events WHERE account_id = $1 AND event_type = 'bounce_spike'`, a.ID)
	require.NoError(t, err)
	for rows.Next() {
		var s struct {
			Domain, Severity string
			Payload          map[string]any
		}
		require.NoError(t, rows.Scan(&s.Domain, &s.Severity, &s.Payload))
		spikes = append(spikes, s)
	}
	require.NoError(t, rows.Err())
	require.Len(t, spikes, 1, "exactly one bounce_spike")
	require.Equal(t, "spiky.example", spikes[0].Domain)
	require.Equal(t, "critical", spikes[0].Severity)
	require.Equal(t, 0.15, spikes[0].Payload["rate"])
	require.Equal(t, 0.05, spikes[0].Payload["threshold"])
	require.Equal(t, float64(600), spikes[0].Payload["bounces"])
	require.Equal(t, float64(4000), spikes[0].Payload["sent"])
	require.Equal(t, float64(60), spikes[0].Payload["window_minutes"])
	require.Nil(t, spikes[0].Payload["baseline"], "no history before the window")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM events WHERE event_type = 'complaint_spike'`))

	// Delivered to the subscription and listed as an alert.
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_deliveries WHERE subscription_id = $1`, sub.ID))
	resp = b.do(t, "GET", "/api/accounts/me/alerts?acknowledged=false", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var alerts []struct {
		EventType string `json:"event_type"`
	}
	resp.JSON(t, &alerts)
	require.Len(t, alerts, 1)
	require.Equal(t, "bounce_spike", alerts[0].EventType)
	// The episode caps the domain's health (a health rescore was enqueued).
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'domain_health' AND args->>'domain_id' = $1`, domainID("spiky.example").String()))

	t.Run("Aggregates", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me/messages/daily-volume?days=2&domain=spiky.example", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var dv struct {
			Volume []struct {
				Date    string `json:"date"`
				Sent    int64  `json:"sent"`
				Bounced int64  `json:"bounced"`
			} `json:"volume"`
		}
		resp.JSON(t, &dv)
		require.Len(t, dv.Volume, 2)
		require.Equal(t, int64(4000), dv.Volume[1].Sent)
		require.Equal(t, int64(600), dv.Volume[1].Bounced)

		resp = b.do(t, "GET", "/api/accounts/me/messages/type-breakdown", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var tb struct {
			Total int64 `json:"total"`
			Types []struct {
				EventType  string           `json:"event_type"`
				Count      int64            `json:"count"`
				ByProvider map[string]int64 `json:"by_provider"`
			} `json:"types"`
		}
		resp.JSON(t, &tb)
		require.Equal(t, int64(10830), tb.Total)
		require.Equal(t, "sent", tb.Types[0].EventType)
		require.Equal(t, int64(10000), tb.Types[0].ByProvider["sendgrid"])

		resp = b.do(t, "GET", "/api/accounts/me/dashboard-summary", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var dash struct {
			Messages struct {
				Sent        int64   `json:"sent"`
				HardBounced int64   `json:"hard_bounced"`
				BounceRate  float64 `json:"bounce_rate"`
			} `json:"messages_last_24h"`
		}
		resp.JSON(t, &dash)
		require.Equal(t, int64(10000), dash.Messages.Sent)
		require.Equal(t, int64(630), dash.Messages.HardBounced)
		require.Equal(t, 0.063, dash.Messages.BounceRate)
	})
}
