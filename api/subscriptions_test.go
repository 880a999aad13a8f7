package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

const subsPath = "/api/accounts/me/event-subscriptions"

type subscriptionJSON struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	DomainFilter   *string  `json:"domain_filter"`
	TagFilter      *string  `json:"tag_filter"`
	Enabled        bool     `json:"enabled"`
	DisabledReason *string  `json:"disabled_reason"`
	SigningSecret  string   `json:"signing_secret"`
}

// hookReceiver is a real endpoint on loopback recording what it gets.
type hookReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	bodies  [][]byte
	status  func(n int) int
	block   chan struct{}
}

func newHookReceiver(t *testing.T, status func(n int) int) *hookReceiver {
	rc := &hookReceiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.headers = append(rc.headers, r.Header.Clone())
		rc.bodies = append(rc.bodies, body)
		n := len(rc.bodies)
		block := rc.block
		rc.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}
		code := 200
		if rc.status != nil {
			code = rc.status(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *hookReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

func (rc *hookReceiver) last() (http.Header, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.headers[len(rc.headers)-1], rc.bodies[len(rc.bodies)-1]
}

func createSub(t *testing.T, b *testBundle, key string, body map[string]any) subscriptionJSON {
	t.Helper()
	resp := b.do(t, "POST", subsPath, key, body)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var out subscriptionJSON
	resp.JSON(t, &out)
	return out
}

func TestSubscriptionCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)

	created := createSub(t, b, acct.Key, map[string]any{
		"url": "https://127.0.0.1/hooks", "event_types": []string{"bounce_spike", "health_score_changed"},
		"domain_filter": "Example.COM", "tag_filter": "prod",
	})
	require.Regexp(t, `^whsec_`, created.SigningSecret)
	require.Equal(t, []string{"bounce_spike", "health_score_changed"}, created.EventTypes)
	require.Equal(t, "example.com", *created.DomainFilter, "the domain filter is normalised like domains are")
	require.True(t, created.Enabled)

	resp := b.do(t, "GET", subsPath+"/"+created.ID, acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	require.NotContains(t, string(resp.Body), created.SigningSecret, "the secret is shown once")
	require.NotContains(t, string(resp.Body), "signing_secret")

	resp = b.do(t, "GET", subsPath, acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	var list []subscriptionJSON
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	require.NotContains(t, string(resp.Body), created.SigningSecret)

	// PATCH changes only what is present; null clears a filter.
	resp = b.do(t, "PATCH", subsPath+"/"+created.ID, acct.Key, map[string]any{"domain_filter": nil, "event_types": nil, "url": "https://127.0.0.1/v2"})
	require.Equal(t, 200, resp.Status, "%s", resp.Body)
	var patched subscriptionJSON
	resp.JSON(t, &patched)
	require.Nil(t, patched.DomainFilter)
	require.Nil(t, patched.EventTypes)
	require.Equal(t, "prod", *patched.TagFilter)
	require.Equal(t, "https://127.0.0.1/v2", patched.URL)

	resp = b.do(t, "PATCH", subsPath+"/"+created.ID, acct.Key, map[string]any{"enabled": false, "tag_filter": "eu"})
	require.Equal(t, 200, resp.Status, "%s", resp.Body)
	resp.JSON(t, &patched)
	require.False(t, patched.Enabled)
	require.Equal(t, "eu", *patched.TagFilter)

	// Another account sees nothing.
	other := b.createAccount(t)
	for _, m := range []string{"GET", "DELETE"} {
		require.Equal(t, 404, b.do(t, m, subsPath+"/"+created.ID, other.Key, nil).Status)
	}
	require.Equal(t, 404, b.do(t, "PATCH", subsPath+"/"+created.ID, other.Key, map[string]any{"enabled": true}).Status)
	require.Equal(t, 404, b.do(t, "POST", subsPath+"/"+created.ID+"/test", other.Key, nil).Status)

	require.Equal(t, 204, b.do(t, "DELETE", subsPath+"/"+created.ID, acct.Key, nil).Status)
	require.Equal(t, 404, b.do(t, "GET", subsPath+"/"+created.ID, acct.Key, nil).Status)
	require.Equal(t, 404, b.do(t, "DELETE", subsPath+"/"+created.ID, acct.Key, nil).Status)
	require.Equal(t, 404, b.do(t, "GET", subsPath+"/not-a-uuid", acct.Key, nil).Status)
}

func TestSubscriptionValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"MissingURL":         {map[string]any{}, "url"},
		"RelativeURL":        {map[string]any{"url": "/hooks"}, "url"},
		"FTP":                {map[string]any{"url": "ftp://127.0.0.1/x"}, "url"},
		"UserInfo":           {map[string]any{"url": "https://user:pw@127.0.0.1/x"}, "url"},
		"MetadataAddress":    {map[string]any{"url": "http://169.254.169.254/latest"}, "url"},
		"UnknownEventType":   {map[string]any{"url": "https://127.0.0.1/x", "event_types": []string{"bounce_spike", "nope"}}, "event_types[1]"},
		"EmptyEventTypes":    {map[string]any{"url": "https://127.0.0.1/x", "event_types": []string{}}, "event_types"},
		"DuplicateEventType": {map[string]any{"url": "https://127.0.0.1/x", "event_types": []string{"bounce_spike", "bounce_spike"}}, "event_types[1]"},
		"BadSecret":          {map[string]any{"url": "https://127.0.0.1/x", "signing_secret": "hunter2"}, "signing_secret"},
		"ShortSecret":        {map[string]any{"url": "https://127.0.0.1/x", "signing_secret": "whsec_AAAA"}, "signing_secret"},
		"BadDomain":          {map[string]any{"url": "https://127.0.0.1/x", "domain_filter": "com"}, "domain_filter"},
		"UnknownField":       {map[string]any{"url": "https://127.0.0.1/x", "secret": "x"}, "secret"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := b.do(t, "POST", subsPath, acct.Key, tc.body)
			require.Equal(t, 422, resp.Status, "%s", resp.Body)
			var e struct {
				Errors []struct{ Field, Message string } `json:"errors"`
			}
			resp.JSON(t, &e)
			require.NotEmpty(t, e.Errors)
			require.Equal(t, tc.field, e.Errors[0].Field, "%s", resp.Body)
			require.NotContains(t, string(resp.Body), "hunter2", "a secret is never echoed")
		})
	}
	t.Run("WrongTypeIs400", func(t *testing.T) {
		require.Equal(t, 400, b.do(t, "POST", subsPath, acct.Key, `{"url": 5}`).Status)
		sub := createSub(t, b, acct.Key, map[string]any{"url": "https://127.0.0.1/x"})
		require.Equal(t, 400, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, `{"tag_filter": 5}`).Status)
		require.Equal(t, 422, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, `{}`).Status)
		require.Equal(t, 422, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, `{"event_types": ["nope"]}`).Status)
		require.Equal(t, 422, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, `{"url": "http://10.0.0.1/"}`).Status)
	})
	t.Run("LoopbackRefusedWithoutAllowList", func(t *testing.T) {
		strict := setup(t, func(o *setupOpts) {
			o.deps = func(d *api.Deps) { d.WebhookGuard = netguard.NewGuard(nil) }
		})
		a := strict.createAccount(t)
		resp := strict.do(t, "POST", subsPath, a.Key, map[string]any{"url": "http://127.0.0.1:8080/hook"})
		require.Equal(t, 422, resp.Status)
		require.Contains(t, resp.Detail(t), "loopback")
		require.Contains(t, resp.Detail(t), "use a public host name", "the refusal says what the customer can do")
		require.NotContains(t, resp.Detail(t), "WEBHOOK_ALLOWED_CIDRS", "and not the server's setting")
	})
	t.Run("UnresolvableHostIsSaved", func(t *testing.T) {
		// .invalid never resolves (RFC 6761); the dial-time guard judges
		// the name's addresses at each delivery, so the URL is kept.
		resp := b.do(t, "POST", subsPath, acct.Key, map[string]any{"url": "https://hooks.mailwatch.invalid/mw"})
		require.Equal(t, 201, resp.Status, "%s", resp.Body)
	})
}

func TestSubscriptionSecretEncryptedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	supplied := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, secret := range []string{"", supplied} {
		body := map[string]any{"url": "https://127.0.0.1/x"}
		if secret != "" {
			body["signing_secret"] = secret
		}
		sub := createSub(t, b, acct.Key, body)
		if secret != "" {
			require.Equal(t, secret, sub.SigningSecret)
		}
		var (
			ct    []byte
			keyID string
			id    [16]byte
		)
		require.NoError(t, b.db.QueryRow(context.Background(),
			"SELECT secret_ciphertext, secret_key_id, id FROM event_subscriptions WHERE id = $1", sub.ID).Scan(&ct, &keyID, &id))
		var row string
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT e::text FROM event_subscriptions e WHERE id = $1", sub.ID).Scan(&row))
		require.NotContains(t, row, sub.SigningSecret, "the row does not hold the secret")
		require.NotContains(t, row, sub.SigningSecret[len("whsec_"):])
		require.False(t, bytes.Contains(ct, []byte(sub.SigningSecret)))
		keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
		require.NoError(t, err)
		require.Equal(t, keyring.PrimaryKeyID(), keyID)
		plain, err := keyring.Open(keyID, ct, id[:])
		require.NoError(t, err, "sealed under the configured key, bound to the row id")
		require.Equal(t, sub.SigningSecret, string(plain))
	}
}

func TestSubscriptionTestPush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	for _, secret := range []string{"", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		rc := newHookReceiver(t, nil)
		body := map[string]any{"url": rc.URL}
		if secret != "" {
			body["signing_secret"] = secret
		}
		sub := createSub(t, b, acct.Key, body)
		resp := b.do(t, "POST", subsPath+"/"+sub.ID+"/test", acct.Key, nil)
		require.Equal(t, 200, resp.Status, "%s", resp.Body)
		var out struct {
			Status     string  `json:"status"`
			StatusCode *int    `json:"status_code"`
			Error      *string `json:"error"`
		}
		resp.JSON(t, &out)
		require.Equal(t, "delivered", out.Status)
		require.Equal(t, 200, *out.StatusCode)
		require.Nil(t, out.Error)
		h, got := rc.last()
		wh, err := standardwebhooks.NewWebhook(sub.SigningSecret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(got, h), "signed with the subscription's secret")
		require.Contains(t, string(got), `"type":"test"`)
	}

	failing := newHookReceiver(t, func(int) int { return 500 })
	sub := createSub(t, b, acct.Key, map[string]any{"url": failing.URL})
	resp := b.do(t, "POST", subsPath+"/"+sub.ID+"/test", acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	var out struct {
		Status     string  `json:"status"`
		StatusCode *int    `json:"status_code"`
		ErrorClass *string `json:"error_class"`
	}
	resp.JSON(t, &out)
	require.Equal(t, "failed", out.Status)
	require.Equal(t, 500, *out.StatusCode)
	require.Equal(t, "http_status", *out.ErrorClass)

	// Nothing listens: failed with no status code.
	failing.Close()
	resp = b.do(t, "POST", subsPath+"/"+sub.ID+"/test", acct.Key, nil)
	require.Equal(t, 200, resp.Status)
	resp.JSON(t, &out)
	require.Equal(t, "failed", out.Status)
	require.Nil(t, out.StatusCode)
}

// FuzzOptionalFields feeds arbitrary JSON to the PATCH field types: they
// never panic, and a value they accept round-trips.
func FuzzOptionalFields(f *testing.F) {
	for _, s := range []string{`null`, `"x"`, `["a","b"]`, `[]`, `5`, `{"a":1}`, `"\u0000"`, `[null]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s api.OptionalString
		if err := s.UnmarshalJSON(b); err == nil && !s.Null {
			out, err := json.Marshal(s.Value)
			require.NoError(t, err)
			var again api.OptionalString
			require.NoError(t, again.UnmarshalJSON(out))
			require.Equal(t, s.Value, again.Value)
		}
		var l api.OptionalStrings
		if err := l.UnmarshalJSON(b); err == nil && !l.Null {
			out, err := json.Marshal(l.Value)
			require.NoError(t, err)
			var again api.OptionalStrings
			require.NoError(t, again.UnmarshalJSON(out))
			require.Equal(t, len(l.Value), len(again.Value))
		}
	})
}
