package channels_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/channels"
)

func TestAllowListBuiltIn(t *testing.T) {
	t.Parallel()
	var builtin *channels.AllowList // nil: each kind's own hosts
	for _, c := range []struct {
		kind, url string
		ok        bool
	}{
		{"slack", "https://hooks.slack.com/services/T0/B0/x", true},
		{"slack", "https://hooks.slack.com:443/services/T0/B0/x", true},
		{"slack", "http://hooks.slack.com/services/T0/B0/x", false},
		{"slack", "https://hooks.slack.com:8443/services/x", false},
		{"slack", "https://hooks.slack.com.evil.example/services/x", false},
		{"slack", "https://user@hooks.slack.com/services/x", false},
		{"slack", "https://prod-01.westus.logic.azure.com/workflows/x", false},
		{"teams", "https://prod-01.westus.logic.azure.com:443/workflows/x/triggers/manual/paths/invoke", true},
		{"teams", "https://default1234.environment.api.powerplatform.com/powerautomate/x", true},
		{"teams", "https://contoso.webhook.office.com/webhookb2/x", true},
		{"teams", "https://logic.azure.com/x", false},
		{"teams", "https://evil-logic.azure.com/x", false},
		{"pagerduty", "https://events.pagerduty.com/v2/enqueue", true},
		{"pagerduty", "https://events.eu.pagerduty.com/v2/enqueue", true},
		{"pagerduty", "https://api.pagerduty.com/incidents", false},
		{"pagerduty", "https://hooks.slack.com/services/x", false},
		{"slack", "not a url", false},
		{"slack", "/relative", false},
	} {
		err := builtin.Check(c.kind, c.url)
		if c.ok {
			require.NoError(t, err, "%s %s", c.kind, c.url)
		} else {
			require.Error(t, err, "%s %s", c.kind, c.url)
		}
	}
	err := builtin.Check("teams", "https://example.com/x")
	require.EqualError(t, err, "host example.com is not a Microsoft Teams host (allowed: *.logic.azure.com, *.powerplatform.com, *.webhook.office.com)")
}

// TestAllowListOverride: CHANNEL_ALLOWED_HOSTS replaces every kind's list
// and admits http.
func TestAllowListOverride(t *testing.T) {
	t.Parallel()
	a, err := channels.ParseAllowedHosts(" 127.0.0.1:8080 , *.internal.example ")
	require.NoError(t, err)
	for _, kind := range channels.Kinds {
		require.NoError(t, a.Check(kind, "http://127.0.0.1:8080/hook"))
		require.NoError(t, a.Check(kind, "https://relay.internal.example/x"))
		require.Error(t, a.Check(kind, "http://127.0.0.1:8081/hook"), "another port")
		require.Error(t, a.Check(kind, "https://hooks.slack.com/services/x"), "the built-in list is replaced")
	}
	empty, err := channels.ParseAllowedHosts("")
	require.NoError(t, err)
	require.NoError(t, empty.Check("slack", "https://hooks.slack.com/services/x"), "empty keeps the built-in lists")
	for _, bad := range []string{"http://x.example", "*", "a/b", "x@y"} {
		_, err := channels.ParseAllowedHosts(bad)
		require.Error(t, err, bad)
	}
}

// TestRetryAfter: a channel waits what the destination's Retry-After asks
// (the webhook pushes' reading of it), at most MaxRetryAfter.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"soon", 0},
		{"-5", 0},
		{"0", time.Second},
		{" 120 ", 2 * time.Minute},
		{"3600", time.Hour},
		{"86400", time.Hour},                   // capped
		{"99999999999999999999999", time.Hour}, // overflow: capped
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), time.Second}, // past: at once
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
		{"Sunday, 01-Mar-26 12:00:30 GMT", 30 * time.Second}, // RFC 850
	} {
		require.Equal(t, c.want, channels.RetryAfter(c.in, now), "%q", c.in)
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "Sun, 01 Mar 2026 12:00:30 GMT", "99999999999999999999", "-1", "1e3"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := channels.RetryAfter(s, now); d < 0 || d > channels.MaxRetryAfter {
			t.Fatalf("%q: %v outside [0, %v]", s, d, channels.MaxRetryAfter)
		}
	})
}
