package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// TestIngressRefusesUnstorableText sends signed webhooks whose ids hold a
// NUL character (\u0000), which Postgres text cannot store: a Stripe event
// id and an auth-provider user id are refused with a 4xx naming the field,
// never a 500 (which Stripe would retry for days).
func TestIngressRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.StripeWebhookSecret = testStripeSecret } })
	acct := b.createAccount(t)

	t.Run("StripeEventID", func(t *testing.T) {
		payload := []byte(`{"id":"evt_1\u0000x","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
		resp := b.postStripe(t, payload, signStripe(payload, testStripeSecret, time.Now()))
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), `"id" contains a NUL character`)
	})

	t.Run("AuthProviderUserID", func(t *testing.T) {
		pid := b.createAuthProvider(t, acct.Key, "oidc", newTestIdP(t), testProviderSecret)["id"].(string)
		body := []byte(`{"id":"evt_nul","type":"user.created","data":{"id":"user_\u0000","email":"nul@example.com"}}`)
		resp := b.rcvRawDo(t, signedAuthEvent(t, pid, "webhook-", "msg_nul", body))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "user id contains a NUL character")
	})
}

// TestStripeSignatureFromTheFuture: a signature timestamped beyond the
// allowed clock skew ahead of the server is refused like a stale one;
// within the skew it is accepted.
func TestStripeSignatureFromTheFuture(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.StripeWebhookSecret = testStripeSecret } })
	event := func(id string) []byte {
		return []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
	}
	ahead := event("evt_future_hour")
	resp := b.postStripe(t, ahead, signStripe(ahead, testStripeSecret, time.Now().Add(time.Hour)))
	require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "ahead of this server's clock")

	skewed := event("evt_future_minute")
	resp = b.postStripe(t, skewed, signStripe(skewed, testStripeSecret, time.Now().Add(time.Minute)))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
}

// TestProviderInputMessages pins what the sending-provider routes say:
// each provider's replay key is named as the provider calls it, a short
// Mailgun signing key is called too short, and a blank label is refused by
// PATCH as by POST (422, never the database's 500).
func TestProviderInputMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)

	t.Run("ResendReplayNamesSvixID", func(t *testing.T) {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		p := b.createProvider(t, a.Key, "resend", "rs-replay", map[string]any{"signing_secret": secret})
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		send := func(body string) response {
			now := time.Now()
			sig, err := wh.Sign("msg_reused", now, []byte(body))
			require.NoError(t, err)
			return b.ingress(t, p.ID, []byte(body), map[string]string{
				"svix-id": "msg_reused", "svix-timestamp": strconv.FormatInt(now.Unix(), 10), "svix-signature": sig})
		}
		first := `{"type":"email.sent","created_at":"2026-01-01T00:00:00Z","data":{"email_id":"e1","to":["a@example.com"]}}`
		require.Equal(t, http.StatusOK, send(first).Status)
		resp := send(`{"type":"email.sent","created_at":"2026-01-01T00:00:00Z","data":{"email_id":"e2","to":["b@example.com"]}}`)
		require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
		detail := resp.Detail(t)
		require.Contains(t, detail, "svix-id")
		require.NotContains(t, detail, "Mailgun")
	})

	t.Run("MailgunReplayNamesToken", func(t *testing.T) {
		const key = "key-0p6mqbf74lb20gzq9f4dhpn9rg3zyk26"
		p := b.createProvider(t, a.Key, "mailgun", "mg-replay", map[string]any{"signing_key": key})
		e := mailgunEvent{key: key, token: "reused-token", id: "one", event: "delivered", recipient: "a@example.com"}
		require.Equal(t, http.StatusOK, b.ingress(t, p.ID, e.body(t, time.Now()), nil).Status)
		e.id = "two"
		resp := b.ingress(t, p.ID, e.body(t, time.Now()), nil)
		require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "Mailgun token")
	})

	t.Run("MailgunKeyTooShort", func(t *testing.T) {
		resp := b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "mailgun", "label": "short", "config": map[string]any{"signing_key": "key-short"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
		detail := resp.Detail(t)
		require.Contains(t, detail, "too short")
		require.Contains(t, detail, "at least 16")
		require.NotContains(t, detail, "is required")
		resp = b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "mailgun", "label": "none", "config": map[string]any{}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "is required")
	})

	t.Run("BlankLabel", func(t *testing.T) {
		p := b.createProvider(t, a.Key, "mailgun", "labelled", map[string]any{"signing_key": "key-0p6mqbf74lb20gzq9f4dhpn9rg3zyk26"})
		for _, label := range []string{" ", "\t \n"} {
			body, err := json.Marshal(map[string]any{"label": label})
			require.NoError(t, err)
			resp := b.do(t, "PATCH", providersPath+"/"+p.ID, a.Key, body)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%q: %s", label, resp.Body)
			require.Contains(t, resp.Detail(t), "label")
			resp = b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "mailgun", "label": label, "config": map[string]any{"signing_key": "key-0p6mqbf74lb20gzq9f4dhpn9rg3zyk26"}})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%q: %s", label, resp.Body)
		}
		resp := b.do(t, "PATCH", providersPath+"/"+p.ID, a.Key, map[string]any{"label": "  renamed  "})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var got providerJSON
		resp.JSON(t, &got)
		require.Equal(t, "renamed", got.Label)
		long := strings.Repeat("x", 101)
		resp = b.do(t, "PATCH", providersPath+"/"+p.ID, a.Key, map[string]any{"label": long})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	})
}
