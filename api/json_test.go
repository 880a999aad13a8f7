package api_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/events"
)

// TestJSONReadsWellInATerminal: no \u003c-style escapes, compact payloads
// like every other member, and a final newline, on every kind of body:
// errors, encoded responses, stored renderings and jsonb payloads.
func TestJSONReadsWellInATerminal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	const subject = `<b>Your code</b> & more`
	b.emit(t, a.ID, events.Event{Type: events.TypeReceiverMessageReceived, Severity: events.SeverityCritical, Payload: map[string]any{
		"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email",
		"from": "Ann <ann@example.com>", "subject": subject, "label": "a > b",
	}})

	check := func(t *testing.T, resp response) {
		t.Helper()
		require.True(t, bytes.HasSuffix(resp.Body, []byte("}\n")) || bytes.HasSuffix(resp.Body, []byte("]\n")), "body ends with a newline: %q", resp.Body)
		require.Equal(t, 1, bytes.Count(resp.Body, []byte("\n")), "one newline, at the end: %s", resp.Body)
		require.NotContains(t, string(resp.Body), `\u003c`)
		require.NotContains(t, string(resp.Body), `\u003e`)
		require.NotContains(t, string(resp.Body), `\u0026`)
	}
	t.Run("ErrorDetail", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/accounts", "", `{"<field>": 1}`)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		require.Contains(t, string(resp.Body), `"detail":"<field>: unknown field"`)
		check(t, resp)
	})
	t.Run("StoredRenderings", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me/events", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"subject":"`+subject+`"`)
		check(t, resp)
	})
	t.Run("JSONBPayloads", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me/alerts", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"subject":"`+subject+`"`)
		require.Contains(t, string(resp.Body), `"label":"a > b"`)
		require.NotContains(t, string(resp.Body), `": `, "spaced like the rest: %s", resp.Body)
		require.NotContains(t, string(resp.Body), `, "`)
		check(t, resp)
	})
	t.Run("Listings", func(t *testing.T) {
		r := b.createReceiver(t, a.Key, nil)
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, r.Address, []byte("Subject: "+subject+"\r\n\r\nhi\r\n"), time.Now()))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		check(t, resp)
		resp = b.do(t, "GET", receiverPath(r.ID, "/messages"), a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"subject":"`+subject+`"`)
		check(t, resp)
	})
	// Answers written without encodeJSON: the JWK Set, the data API (rows
	// and PostgREST-shaped errors) and a sending provider's webhook.
	t.Run("JWKS", func(t *testing.T) {
		resp := b.do(t, "GET", "/.well-known/jwks.json", "", nil)
		require.Equal(t, http.StatusOK, resp.Status)
		check(t, resp)
	})
	t.Run("DataAPI", func(t *testing.T) {
		resp := b.do(t, "GET", "/rest/v1", "", nil)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s", resp.Body)
		check(t, resp)
		// Rows come as PostgREST writes them (one per line), then the
		// final newline.
		resp = b.do(t, "GET", "/rest/v1/events", b.token(t, a.Key), nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.True(t, bytes.HasSuffix(resp.Body, []byte("]\n")), "body ends with a newline: %q", resp.Body)
	})
	t.Run("ProviderIngress", func(t *testing.T) {
		p := b.createProvider(t, a.Key, "postmark", "pm", map[string]any{"basic_auth_user": "hook", "basic_auth_password": "a long password"})
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook:a long password"))
		resp := b.ingress(t, p.ID, corpus.Read(t, "esp/postmark-bounce.json"), map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		check(t, resp)
	})
	t.Run("EncodedResponse", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		check(t, resp)
		resp = b.do(t, "GET", "/api/accounts/me/events/types", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.False(t, strings.Contains(string(resp.Body), `\u003c`))
	})
}
