package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// sameAsEncodingJSON checks that v's hand-written JSON decodes to exactly
// what encoding/json makes of it.
func sameAsEncodingJSON(t *testing.T, v interface {
	JSONAppender
}, plain any) {
	t.Helper()
	got, err := v.AppendJSON(nil)
	require.NoError(t, err)
	require.True(t, json.Valid(got), "invalid JSON: %s", got)
	want, err := json.Marshal(plain)
	require.NoError(t, err)
	var g, w any
	require.NoError(t, json.Unmarshal(got, &g))
	require.NoError(t, json.Unmarshal(want, &w))
	require.Equal(t, w, g)
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	domain := "example.com"
	by, note, key := "alice <ops>", "line\nbreak \"quoted\" & \u2028", "mw_AbCd"
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	ev := Event{ID: uuid.New(), EventType: "dns_record_changed", Payload: Payload(`{"a": [1, 2], "b": {"c": "d"}}`),
		CreatedAt: at, Severity: "critical", Domain: &domain, Tags: []string{"prod", "", "é\x01"}}
	sameAsEncodingJSON(t, &ev, ev)
	bare := Event{ID: uuid.New(), Tags: []string{}}
	sameAsEncodingJSON(t, &bare, bare)

	alert := Alert{Event: ev, Acknowledged: true, AcknowledgedBy: &by, AcknowledgedAt: &at, Note: &note, AcknowledgedKeyIdentifier: &key}
	sameAsEncodingJSON(t, &alert, alert)
	sameAsEncodingJSON(t, &Alert{Event: ev}, Alert{Event: ev})

	page := &Page[Alert]{Items: []Alert{alert, {Event: ev}}}
	got, err := page.AppendJSON(nil)
	require.NoError(t, err)
	var items []map[string]any
	require.NoError(t, json.Unmarshal(got, &items))
	require.Len(t, items, 2)
	require.Equal(t, "alice <ops>", items[0]["acknowledged_by"], "alert fields are not lost to the embedded event's encoder")
	require.Equal(t, false, items[1]["acknowledged"])

	empty, err := (&Page[Event]{}).AppendJSON(nil)
	require.NoError(t, err)
	require.Equal(t, "[]", string(empty))
}
