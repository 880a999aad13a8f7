package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/events"
)

// Every registered type has a title, and its example payload a summary
// that names what happened without Go's formatting debris.
func TestEveryTypeDescribed(t *testing.T) {
	t.Parallel()
	for _, typ := range events.Types() {
		require.NotEmpty(t, typ.Title, typ.Name)
		s := events.Summary(typ.Name, typ.Example)
		require.NotEmpty(t, s, typ.Name)
		for _, junk := range []string{"%!", "<nil>", "map[", "  ", ": :", "()"} {
			require.NotContains(t, s, junk, "%s: %q", typ.Name, s)
		}
		var p map[string]any
		require.NoError(t, json.Unmarshal(typ.Example, &p))
		if d, ok := p["domain"].(string); ok {
			require.True(t, strings.HasPrefix(s, d+": "), "%s: %q names its domain first", typ.Name, s)
		}
	}
}

func TestSummaries(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ typ, payload, want string }{
		{events.TypeHealthScoreChanged, `{"domain":"example.com","previous_score":90,"score":40,"delta":-50}`, "example.com: score fell from 90 to 40"},
		{events.TypeHealthScoreChanged, `{"domain":"example.com","previous_score":40,"score":90,"delta":50}`, "example.com: score rose from 40 to 90"},
		{events.TypeBounceSpike, `{"domain":"example.com","provider":"postmark","window_minutes":60,"rate":0.082,"threshold":0.05,"bounces":41,"sent":500}`,
			"example.com: bounce rate 8.2% (threshold 5%): 41 of 500 messages in 1 hour at postmark"},
		{events.TypeDNSRecordChanged, `{"domain":"example.com","check":"spf","before":{"status":"pass"},"after":{"status":"fail"}}`,
			"example.com: SPF record changed: pass → fail"},
		{events.TypeCertificateExpiring, `{"domain":"example.com","mx_host":"mx1.example.com","fingerprint":"f","not_after":"2026-12-01T00:00:00Z","days_left":1,"threshold":7}`,
			"example.com: mx1.example.com's certificate expires in 1 day"},
		{events.TypeAlertAcknowledged, `{"alert_id":"x","alert_type":"bounce_spike","acknowledged_by":"ops@example.com","key_identifier":"k"}`, "Bounce spike acknowledged by ops@example.com"},
		{events.TypeTLSReportFailures, `{"domain":"example.com","org_name":"Google","report_id":"r","successful_sessions":97,"failed_sessions":3,"failures_by_type":{"starttls-not-supported":2,"certificate-expired":1}}`,
			"example.com: Google: 3 of 100 TLS sessions failed (certificate-expired 1, starttls-not-supported 2)"},
		{events.TypeDMARCNewSubdomain, `{"domain":"example.com","subdomain":"billing.example.com","first_seen":"2026-01-01","messages":212,"passing":53,"pass_rate":0.25}`,
			"example.com: mail claims new subdomain billing.example.com: 212 messages, 25% passing DMARC"},
	} {
		require.Equal(t, c.want, events.Summary(c.typ, []byte(c.payload)))
	}
	// Unknown types and bad payloads have no summary; unknown titles read as words.
	require.Empty(t, events.Summary("nope", []byte(`{}`)))
	require.Empty(t, events.Summary(events.TypeBounceSpike, []byte(`[1]`)))
	require.Empty(t, events.Summary(events.TypeBounceSpike, []byte(`{"domain":"example.com"}`)), "required fields missing")
	require.Equal(t, "Some new type", events.Title("some_new_type"))
	// A long payload string is cut.
	long := `{"subscription_id":"s","url":"https://` + strings.Repeat("a", 1000) + `","reason":"x"}`
	require.LessOrEqual(t, len(events.Summary(events.TypeSubscriptionDisabled, []byte(long))), 300)
}
