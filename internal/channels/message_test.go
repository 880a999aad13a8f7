package channels_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

var update = flag.Bool("update", false, "rewrite the golden payloads in testdata/")

const (
	goldenBase = "https://app.mailwatch.example"
	goldenKey  = "R0123456789abcdef0123456789abcde"
)

// goldenAlert is a critical health drop with two likely causes, as Emit
// stores it.
func goldenAlert() dbsqlc.Event {
	domain := "example.com"
	return dbsqlc.Event{
		ID: uuid.MustParse("0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f80"), AccountID: uuid.MustParse("0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f81"),
		EventType: "health_score_changed", Severity: "critical", Domain: &domain, Tags: []string{"prod"},
		CreatedAt: time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC),
		Payload: json.RawMessage(`{"domain":"example.com","previous_score":82,"score":45,"delta":-37,` +
			`"reasons":["DMARC policy changed to none"],"likely_causes":[` +
			`{"event_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f82","event_type":"dns_record_changed","at":"2026-03-01T11:02:00Z",` +
			`"title":"DNS record changed","summary":"example.com: DMARC record changed: pass → fail","score":80,"evidence":{}},` +
			`{"event_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f83","event_type":"bounce_spike","at":"2026-03-01T09:15:00Z",` +
			`"title":"Bounce spike","summary":"example.com: bounce rate 8.2% <& more>","score":40,"evidence":{}}]}`),
	}
}

// TestGoldenPayloads: each kind's body of one alert is byte for byte the
// file in testdata/ (go test ./internal/channels -run Golden -update
// rewrites them).
func TestGoldenPayloads(t *testing.T) {
	t.Parallel()
	m := channels.MessageOf(goldenAlert(), goldenBase)
	for _, c := range []struct {
		file  string
		build func() ([]byte, error)
	}{
		{"slack.json", func() ([]byte, error) { return channels.SlackPayload(m) }},
		{"teams.json", func() ([]byte, error) { return channels.TeamsPayload(m) }},
		{"pagerduty_trigger.json", func() ([]byte, error) { return channels.PagerDutyPayload(goldenKey, channels.ActionTrigger, m) }},
		{"pagerduty_resolve.json", func() ([]byte, error) { return channels.PagerDutyPayload(goldenKey, channels.ActionResolve, m) }},
	} {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			got, err := c.build()
			require.NoError(t, err)
			require.True(t, json.Valid(got))
			var pretty bytes.Buffer
			require.NoError(t, json.Indent(&pretty, got, "", "  "))
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", c.file)
			if *update {
				require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(want), pretty.String())
		})
	}
}

// TestMessageOf: the message names the domain, says what happened, lists
// the likely causes and links to the alert.
func TestMessageOf(t *testing.T) {
	t.Parallel()
	ev := goldenAlert()
	m := channels.MessageOf(ev, goldenBase+"/")
	require.Equal(t, "example.com", m.Domain)
	require.Equal(t, "Health score changed", m.Title)
	require.Equal(t, "example.com: score fell from 82 to 45", m.Summary)
	require.Equal(t, goldenBase+"/alerts?event="+ev.ID.String(), m.Link)
	require.True(t, m.HasCauses)
	require.Len(t, m.Causes, 2)
	require.Equal(t, "health", m.Group)

	slack, err := channels.SlackPayload(m)
	require.NoError(t, err)
	require.Contains(t, string(slack), "bounce rate 8.2% &lt;&amp; more&gt;", "Slack's reserved characters are escaped")
	require.NotContains(t, string(slack), `\u003c`, "no HTML escapes")

	// A warning links to the events page and looks for no causes.
	ev.Severity = "warning"
	w := channels.MessageOf(ev, goldenBase)
	require.Equal(t, goldenBase+"/events", w.Link)
	require.False(t, w.HasCauses)
}
