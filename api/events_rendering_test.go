package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/events"
)

// documentedJSON encodes v as the API documents its bodies: encoding/json
// without HTML escapes, a final newline.
func documentedJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

// TestStoredRenderingsServedAsDocumented: the events listing sends stored
// renderings as they are, so they must be byte for byte the documented
// Event as the API's encoder writes it, with `<`, `>` and `&` in the
// payload, the domain and the tags written as they are (no \u003c). It
// holds for an event emitted now (stored unescaped) and for a row stored
// HTML-escaped before renderings were stored unescaped (tidied when read),
// from the database and again from the first-page cache.
func TestStoredRenderingsServedAsDocumented(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	ctx := context.Background()
	domain := "ex<am>&ple.com"
	tags := []string{"<eu>", "a&b"}
	payload := map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email",
		"from": "Ann <ann@example.com>", "subject": "<b>code</b> & more", "label": "a > b"}
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	row := b.emit(t, a.ID, events.Event{Type: events.TypeReceiverMessageReceived, Domain: domain, Tags: tags, Payload: payload, At: at})

	var stored []byte
	require.NoError(t, b.db.QueryRow(ctx, "SELECT rendered FROM events WHERE id = $1", row.ID).Scan(&stored))
	require.NotContains(t, string(stored), `\u00`, "stored as the API sends it")
	require.Contains(t, string(stored), `"subject":"<b>code</b> & more"`)

	payloadJSON := bytes.TrimSuffix(documentedJSON(t, payload), []byte("\n"))
	emitted := api.Event{ID: row.ID, EventType: events.TypeReceiverMessageReceived, Payload: api.Payload(payloadJSON),
		CreatedAt: at, Severity: row.Severity, Domain: &domain, Tags: tags}
	require.Equal(t, string(bytes.TrimSuffix(documentedJSON(t, emitted), []byte("\n"))), string(stored))

	// A row written by the previous code: the same event shape, HTML-escaped.
	legacy := emitted
	legacy.ID = uuid.Must(uuid.NewV7())
	legacy.CreatedAt = at.Add(30 * time.Second)
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, bytes.TrimSuffix(documentedJSON(t, legacy), []byte("\n")))
	require.Contains(t, escaped.String(), `\u003c`)
	require.Contains(t, escaped.String(), `\u0026`)
	_, err := b.db.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload, rendered, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, legacy.ID, a.ID, legacy.EventType, legacy.Severity, domain, tags,
		payloadJSON, escaped.String(), legacy.CreatedAt)
	require.NoError(t, err)

	want := documentedJSON(t, []api.Event{legacy, emitted})
	for _, from := range []string{"database", "cache"} {
		resp := b.do(t, "GET", "/api/accounts/me/events", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, from)
		require.Equal(t, string(want), string(resp.Body), "from the %s", from)
		require.NotContains(t, string(resp.Body), `\u00`, from)
	}
}
