package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/esp/ses/snstest"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/jobs"
)

const providersPath = "/api/accounts/me/sending-providers"

type providerJSON struct {
	ID               string   `json:"id"`
	Kind             string   `json:"kind"`
	Label            string   `json:"label"`
	ConfiguredFields []string `json:"configured_fields"`
	IngressURL       string   `json:"ingress_url"`
	SetupSteps       []string `json:"setup_steps"`
	LinkedDomains    []string `json:"linked_domains"`
}

type ingressJSON struct {
	PayloadID *string `json:"payload_id"`
	Duplicate bool    `json:"duplicate"`
}

func (b *testBundle) createProvider(t *testing.T, key, kind, label string, cfg map[string]any) providerJSON {
	t.Helper()
	resp := b.do(t, "POST", providersPath, key, map[string]any{"kind": kind, "label": label, "config": cfg})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var p providerJSON
	resp.JSON(t, &p)
	return p
}

func (b *testBundle) addDomain(t *testing.T, key, name string) {
	t.Helper()
	resp := b.do(t, "POST", "/api/accounts/me/domains", key, map[string]any{"domain": name})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
}

func (b *testBundle) ingress(t *testing.T, id string, body []byte, headers map[string]string) response {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/webhooks/providers/"+id, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return b.rcvRawDo(t, req)
}

// insertClient is an insert-only River client for running job functions
// inside the test's transaction.
func insertClient(t *testing.T) *river.Client[pgx.Tx] {
	c, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	return c
}

// normaliseAll runs the normalisation job function on every unprocessed
// payload, as the worker would.
func (b *testBundle) normaliseAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	tx := b.db.(pgx.Tx)
	rows, err := tx.Query(ctx, `SELECT id FROM provider_payloads WHERE processed_at IS NULL ORDER BY id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	for _, id := range ids {
		_, err := providers.ProcessPayload(ctx, tx, id, time.Now())
		require.NoError(t, err)
	}
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

type sendgridKey struct {
	key *ecdsa.PrivateKey
	pub string
}

func newSendgridKey(t *testing.T) sendgridKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	return sendgridKey{key: k, pub: base64.StdEncoding.EncodeToString(der)}
}

func (k sendgridKey) headers(t *testing.T, body []byte) map[string]string {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, h[:])
	require.NoError(t, err)
	return map[string]string{
		"X-Twilio-Email-Event-Webhook-Signature": base64.StdEncoding.EncodeToString(sig),
		"X-Twilio-Email-Event-Webhook-Timestamp": ts,
	}
}

func TestSendingProviderCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) { d.PublicBaseURL = "https://mw.example.com" }
	})
	a := b.createAccount(t)
	other := b.createAccount(t)

	t.Run("ValidationPerKind", func(t *testing.T) {
		for _, tc := range []struct {
			kind  string
			cfg   map[string]any
			field string
		}{
			{"ses", map[string]any{}, "config.topic_arns"},
			{"ses", map[string]any{"topic_arns": []string{"not-an-arn"}}, "config.topic_arns[0]"},
			{"sendgrid", map[string]any{"public_key": "AAAA"}, "config.public_key"},
			{"sendgrid", map[string]any{"signing_key": "x"}, "config.signing_key"},
			{"postmark", map[string]any{"basic_auth_user": "u", "basic_auth_password": "short"}, "config.basic_auth_password"},
			{"postmark", map[string]any{"basic_auth_user": "u", "basic_auth_password": "long enough pw", "allowed_ips": []string{"nope"}}, "config.allowed_ips"},
			{"mailgun", map[string]any{}, "config.signing_key"},
			{"resend", map[string]any{"signing_secret": "plain"}, "config.signing_secret"},
		} {
			resp := b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": tc.kind, "label": "x", "config": tc.cfg})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s %v: %s", tc.kind, tc.cfg, resp.Body)
			require.Contains(t, string(resp.Body), tc.field)
		}
		resp := b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "sparkpost", "label": "x", "config": map[string]any{}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		resp = b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "mailgun", "label": "x", "config": map[string]any{"nope": 1}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	})

	const mailgunKey = "key-0p6mqbf74lb20gzq9f4dhpn9rg3zyk26"
	p := b.createProvider(t, a.Key, "mailgun", "transactional", map[string]any{"signing_key": mailgunKey})
	require.Equal(t, "https://mw.example.com/api/webhooks/providers/"+p.ID, p.IngressURL)
	require.Equal(t, []string{"signing_key"}, p.ConfiguredFields)
	require.NotEmpty(t, p.SetupSteps)
	require.Empty(t, p.LinkedDomains)

	t.Run("SecretNeverShown", func(t *testing.T) {
		for _, path := range []string{providersPath, providersPath + "/" + p.ID} {
			resp := b.do(t, "GET", path, a.Key, nil)
			require.Equal(t, http.StatusOK, resp.Status)
			require.NotContains(t, string(resp.Body), mailgunKey)
		}
		var stored []byte
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT secret_ciphertext FROM sending_providers WHERE id = $1`, p.ID).Scan(&stored))
		require.NotContains(t, string(stored), mailgunKey)
	})
	t.Run("DuplicateLabel", func(t *testing.T) {
		resp := b.do(t, "POST", providersPath, a.Key, map[string]any{"kind": "mailgun", "label": "transactional", "config": map[string]any{"signing_key": mailgunKey}})
		require.Equal(t, http.StatusConflict, resp.Status)
	})
	t.Run("OtherAccount404", func(t *testing.T) {
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", providersPath+"/"+p.ID, other.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", providersPath+"/"+p.ID, other.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "POST", providersPath+"/"+p.ID+"/links", other.Key, map[string]any{"domain": "example.com"}).Status)
	})
	t.Run("Links", func(t *testing.T) {
		b.addDomain(t, a.Key, "links-example.com")
		resp := b.do(t, "POST", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": "LINKS-example.com"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var got providerJSON
		resp.JSON(t, &got)
		require.Equal(t, []string{"links-example.com"}, got.LinkedDomains)
		resp = b.do(t, "POST", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": "unregistered.example"})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		resp = b.do(t, "DELETE", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": "links-example.com"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		resp.JSON(t, &got)
		require.Empty(t, got.LinkedDomains)
		resp = b.do(t, "DELETE", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": "links-example.com"})
		require.Equal(t, http.StatusNotFound, resp.Status)
	})
	t.Run("Update", func(t *testing.T) {
		resp := b.do(t, "PATCH", providersPath+"/"+p.ID, a.Key, map[string]any{"label": "renamed"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		resp = b.do(t, "PATCH", providersPath+"/"+p.ID, a.Key, map[string]any{"config": map[string]any{"public_key": "x"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	})
	t.Run("Delete", func(t *testing.T) {
		// A stored payload and its message event go with the provider
		// (payloads have no foreign key to cascade; the route deletes them).
		sg := newSendgridKey(t)
		sp := b.createProvider(t, a.Key, "sendgrid", "to-delete", map[string]any{"public_key": sg.pub})
		body := []byte(`[{"email":"gone@example.net","event":"delivered","sg_event_id":"del-1","sg_message_id":"m.1","timestamp":1700000000}]`)
		require.Equal(t, http.StatusOK, b.ingress(t, sp.ID, body, sg.headers(t, body)).Status)
		b.normaliseAll(t)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM provider_payloads WHERE provider_id = $1`, sp.ID))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM message_events WHERE provider_id = $1`, sp.ID))
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", providersPath+"/"+sp.ID, a.Key, nil).Status)
		require.Zero(t, b.count(t, `SELECT count(*) FROM provider_payloads WHERE provider_id = $1`, sp.ID))
		require.Zero(t, b.count(t, `SELECT count(*) FROM message_events WHERE provider_id = $1`, sp.ID))

		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", providersPath+"/"+p.ID, a.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.ingress(t, p.ID, []byte(`{}`), nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", providersPath+"/"+p.ID, a.Key, nil).Status)
	})
}

// TestProviderIngressCorpus posts the corpus payloads with their real (or,
// for Resend and Postmark, test-made) credentials, checks what is stored,
// refused and deduplicated, and normalises them.
func TestProviderIngressCorpus(t *testing.T) {
	t.Parallel()
	// The corpus vectors are years old: no timestamp window (the server's
	// default is esp.DefaultMaxAge).
	b := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.ProviderWebhookMaxAge = 0 } })
	a := b.createAccount(t)

	t.Run("SendGridVector", func(t *testing.T) {
		var v struct {
			PublicKey string `json:"public_key_base64_der"`
			Signature string `json:"signature"`
			Timestamp string `json:"timestamp"`
			RawBody   string `json:"raw_body"`
		}
		require.NoError(t, json.Unmarshal(corpus.Read(t, "esp/sendgrid-signed-vector.json"), &v))
		p := b.createProvider(t, a.Key, "sendgrid", "sg", map[string]any{"public_key": v.PublicKey})
		h := map[string]string{"X-Twilio-Email-Event-Webhook-Signature": v.Signature, "X-Twilio-Email-Event-Webhook-Timestamp": v.Timestamp}
		resp := b.ingress(t, p.ID, []byte(v.RawBody), h)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var got ingressJSON
		resp.JSON(t, &got)
		require.False(t, got.Duplicate)
		require.NotNil(t, got.PayloadID)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND args->'payload_ids' ? $1`, *got.PayloadID))

		resp = b.ingress(t, p.ID, []byte(v.RawBody), h)
		require.Equal(t, http.StatusOK, resp.Status)
		resp.JSON(t, &got)
		require.True(t, got.Duplicate, "a replay is acknowledged and ignored")

		flipped := []byte(v.RawBody)
		flipped[3] ^= 0x01
		resp = b.ingress(t, p.ID, flipped, h)
		require.Equal(t, http.StatusUnauthorized, resp.Status)
		resp.Detail(t)
		require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, []byte(v.RawBody), nil).Status)
	})

	t.Run("Mailgun", func(t *testing.T) {
		p := b.createProvider(t, a.Key, "mailgun", "mg", map[string]any{"signing_key": "key-0p6mqbf74lb20gzq9f4dhpn9rg3zyk26"})
		for _, name := range []string{"mailgun-permanent_failure.json", "mailgun-temporary_failure.json", "mailgun-complained.json", "mailgun-delivered.json"} {
			resp := b.ingress(t, p.ID, corpus.Read(t, "esp/"+name), nil)
			require.Equal(t, http.StatusOK, resp.Status, "%s: %s", name, resp.Body)
		}
		// The signature covers timestamp+token only: the same token with
		// another body is a forgery.
		resp := b.ingress(t, p.ID, corpus.Read(t, "esp/mailgun-suppression_failure.json"), nil)
		require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
		body := corpus.Read(t, "esp/mailgun-delivered.json")
		body = bytes.Replace(body, []byte(`"d1931d9645b65e60f6fddf94448e982ff8db9256144a7fcb15"`), []byte(`"d1931d9645b65e60f6fddf94448e982ff8db9256144a7fcb16"`), 1)
		require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, body, nil).Status)
	})

	t.Run("Postmark", func(t *testing.T) {
		p := b.createProvider(t, a.Key, "postmark", "pm", map[string]any{"basic_auth_user": "hook", "basic_auth_password": "a long password"})
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook:a long password"))
		for _, name := range []string{"postmark-bounce.json", "postmark-delivery.json", "postmark-spam_complaint.json", "postmark-subscription_change.json"} {
			resp := b.ingress(t, p.ID, corpus.Read(t, "esp/"+name), map[string]string{"Authorization": auth})
			require.Equal(t, http.StatusOK, resp.Status, "%s: %s", name, resp.Body)
		}
		bad := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook:a long passwore"))
		require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, corpus.Read(t, "esp/postmark-bounce.json"), map[string]string{"Authorization": bad}).Status)
		p2 := b.createProvider(t, a.Key, "postmark", "pm-ip", map[string]any{"basic_auth_user": "hook", "basic_auth_password": "a long password", "allowed_ips": []string{"50.31.156.0/24"}})
		require.Equal(t, http.StatusUnauthorized, b.ingress(t, p2.ID, corpus.Read(t, "esp/postmark-bounce.json"), map[string]string{"Authorization": auth}).Status,
			"the test client's address is not in the allow-list")
	})

	t.Run("Resend", func(t *testing.T) {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		p := b.createProvider(t, a.Key, "resend", "rs", map[string]any{"signing_secret": secret})
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		for i, name := range []string{"resend-sent.json", "resend-bounced.json", "resend-bounced-suppressed.json", "resend-complained.json"} {
			body := corpus.Read(t, "esp/"+name)
			id := fmt.Sprintf("msg_%d", i)
			now := time.Now()
			sig, err := wh.Sign(id, now, body)
			require.NoError(t, err)
			h := map[string]string{"svix-id": id, "svix-timestamp": strconv.FormatInt(now.Unix(), 10), "svix-signature": sig}
			require.Equal(t, http.StatusOK, b.ingress(t, p.ID, body, h).Status, name)
			h["svix-id"] = id + "x"
			require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, body, h).Status, name)
		}
	})

	b.normaliseAll(t)
	check := func(email string) (bool, string) {
		resp := b.do(t, "GET", "/api/accounts/me/suppressions/check?email="+email, a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var c struct {
			Suppressed bool    `json:"suppressed"`
			Reason     *string `json:"reason"`
		}
		resp.JSON(t, &c)
		if c.Reason == nil {
			return c.Suppressed, ""
		}
		return c.Suppressed, *c.Reason
	}
	// Hard bounces and complaints suppress; soft bounces and provider
	// suppressions do not.
	for email, reason := range map[string]string{
		"Alice@Example.com": "hard_bounce", "john@example.com": "hard_bounce", "bounced@resend.dev": "hard_bounce",
		"complained@resend.dev": "complaint",
	} {
		ok, r := check(email)
		require.True(t, ok, email)
		require.Equal(t, reason, r, email)
	}
	for _, email := range []string{"blocked@example.org", "test@example.com", "hello@world.com"} {
		ok, _ := check(email)
		require.False(t, ok, email)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM message_events WHERE event_type = 'suppressed' AND provider_kind = 'resend'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM message_events WHERE event_type = 'deferred' AND provider_kind = 'mailgun'`))

	t.Run("DuplicateEventsCountedOnce", func(t *testing.T) {
		before := b.count(t, `SELECT count(*) FROM message_events`)
		// Re-running every job converges: nothing new.
		_, err := b.db.Exec(context.Background(), `UPDATE provider_payloads SET processed_at = NULL`)
		require.NoError(t, err)
		b.normaliseAll(t)
		require.Equal(t, before, b.count(t, `SELECT count(*) FROM message_events`))
	})
}

func TestSuppressionRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	other := b.createAccount(t)
	resp := b.do(t, "POST", "/api/accounts/me/suppressions", a.Key, map[string]any{"email": "Ann@Example.com", "domain": "Send.Example.com"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/accounts/me/suppressions", a.Key, map[string]any{"email": "ann@example.COM"}).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", "/api/accounts/me/suppressions", a.Key, map[string]any{"email": "not an address"}).Status)

	resp = b.do(t, "GET", "/api/accounts/me/suppressions/check?email=ANN@example.com", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var c struct {
		Suppressed bool    `json:"suppressed"`
		Reason     *string `json:"reason"`
		Domain     *string `json:"domain"`
	}
	resp.JSON(t, &c)
	require.True(t, c.Suppressed)
	require.Equal(t, "manual", *c.Reason)
	require.Equal(t, "send.example.com", *c.Domain)

	resp = b.do(t, "GET", "/api/accounts/me/suppressions/check?email=ann@example.com", other.Key, nil)
	resp.JSON(t, &c)
	require.False(t, c.Suppressed, "another account's list is its own")
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/suppressions/check?email=x", a.Key, nil).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/suppressions/check", a.Key, nil).Status)

	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/accounts/me/suppressions?email=ann@example.com", a.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/api/accounts/me/suppressions?email=ann@example.com", a.Key, nil).Status)
}

// TestSESOverSNSEndToEnd runs SES through SNS against a loopback HTTPS
// server standing in for sns.us-east-1.amazonaws.com: the subscription is
// confirmed by the job (not inline), notifications verify with signature
// versions 1 and 2, and a bounce suppresses its recipient.
func TestSESOverSNSEndToEnd(t *testing.T) {
	t.Parallel()
	sns := snstest.New(t)
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) {
			d.SNSCerts = &ses.HTTPCertFetcher{Client: ses.AWSOnlyClient(sns.Client())}
		}
	})
	a := b.createAccount(t)
	const topic = "arn:aws:sns:us-east-1:123456789012:ses-events"
	b.addDomain(t, a.Key, "example.com")
	p := b.createProvider(t, a.Key, "ses", "ses", map[string]any{"topic_arns": []string{topic}})
	require.Equal(t, http.StatusOK, b.do(t, "POST", providersPath+"/"+p.ID+"/links", a.Key, map[string]any{"domain": "example.com"}).Status)

	resp := b.ingress(t, p.ID, sns.SubscriptionConfirmation(topic, "tok-1"), nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var got ingressJSON
	resp.JSON(t, &got)
	require.Empty(t, sns.Confirmed(), "confirmation is a job, not inline")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'sns_subscription_confirm'`))
	require.NoError(t, providers.ConfirmSNSPayload(context.Background(), b.db, ses.AWSOnlyClient(sns.Client()), uuid.MustParse(*got.PayloadID), time.Now()))
	require.Equal(t, []string{"tok-1"}, sns.Confirmed())

	bounce := string(corpus.Read(t, "esp/ses-bounce.json"))
	soft := strings.Replace(strings.Replace(bounce, `"Permanent"`, `"Transient"`, 1), "jane@example.com", "soft@example.net", -1)
	soft = strings.Replace(soft, "00000138111222aa-44455566", "00000138111222aa-44455599", 1)
	for i, msg := range []string{bounce, soft, string(corpus.Read(t, "esp/ses-complaint.json"))} {
		version := []string{"1", "2"}[i%2]
		resp := b.ingress(t, p.ID, sns.Notification(topic, fmt.Sprintf("n-%d", i), msg, version), nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	}
	other := sns.Notification("arn:aws:sns:us-east-1:123456789012:not-ours", "n-x", bounce, "2")
	require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, other, nil).Status)
	forged := bytes.Replace(sns.Notification(topic, "n-y", bounce, "2"), []byte("jane@example.com"), []byte("jane@example.org"), 1)
	require.Equal(t, http.StatusUnauthorized, b.ingress(t, p.ID, forged, nil).Status)

	// A certificate that cannot be fetched is SNS's problem to retry: 503.
	missing := bytes.Replace(sns.Notification(topic, "n-z", bounce, "2"), []byte(snstest.CertPath), []byte("/missing.pem"), 1)
	resp = b.ingress(t, p.ID, missing, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.Status, "%s", resp.Body)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	b.normaliseAll(t)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM suppressions WHERE email = 'jane@example.com' AND reason = 'hard_bounce' AND domain = 'example.com'`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM suppressions WHERE email = 'soft@example.net'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM suppressions WHERE email = 'richard@example.com' AND reason = 'complaint'`))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM message_events WHERE domain = 'example.com' AND NOT unlinked`))
}
