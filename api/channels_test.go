package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/channels"
)

const channelsPath = "/api/accounts/me/notification-channels"

type channelJSON struct {
	ID            string   `json:"id"`
	Kind          string   `json:"kind"`
	Label         string   `json:"label"`
	Destination   string   `json:"destination"`
	Groups        []string `json:"groups"`
	MinSeverity   string   `json:"min_severity"`
	LastSuccessAt *string  `json:"last_success_at"`
	FailingSince  *string  `json:"failing_since"`
	LastError     *string  `json:"last_error"`
}

// chatServer stands in for Slack or PagerDuty on loopback.
type chatServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	status int
}

func newChatServer(t *testing.T, status int) *chatServer {
	t.Helper()
	c := &chatServer{status: status}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(body))
		c.mu.Unlock()
		w.WriteHeader(c.status)
		_, _ = w.Write([]byte("invalid_payload"))
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *chatServer) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bodies...)
}

// withChannelHosts sets CHANNEL_ALLOWED_HOSTS to hosts.
func withChannelHosts(t *testing.T, hosts string) func(*setupOpts) {
	return func(o *setupOpts) {
		o.deps = func(d *api.Deps) {
			h, err := channels.ParseAllowedHosts(hosts)
			require.NoError(t, err)
			d.ChannelHosts = h
			d.DashboardURL = "https://app.mailwatch.test"
		}
	}
}

// TestNotificationChannels: create, list, get, test and delete; the URL
// and routing key are never returned; another account's channel is 404.
func TestNotificationChannels(t *testing.T) {
	t.Parallel()
	chat := newChatServer(t, http.StatusOK)
	b := setup(t, withChannelHosts(t, strings.TrimPrefix(chat.URL, "http://")))
	acct := b.createAccount(t)
	other := b.createAccount(t)

	slackURL := chat.URL + "/services/T0/B0/secretpath"
	resp := b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "slack", "url": slackURL, "label": "#ops",
		"groups": []string{"health", "sending"}, "min_severity": "warning"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	require.NotContains(t, string(resp.Body), "secretpath")
	var slack channelJSON
	resp.JSON(t, &slack)
	require.Equal(t, chat.URL+"/…", slack.Destination)
	require.Equal(t, []string{"health", "sending"}, slack.Groups)
	require.Equal(t, "warning", slack.MinSeverity)
	require.Nil(t, slack.FailingSince)

	key := "Rk0123456789abcdef0123456789wxyz"
	resp = b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "pagerduty", "routing_key": key, "url": chat.URL + "/v2/enqueue"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var pd channelJSON
	resp.JSON(t, &pd)
	require.Nil(t, pd.Groups)
	require.Equal(t, "critical", pd.MinSeverity)
	require.True(t, strings.HasSuffix(pd.Destination, "key …wxyz"), pd.Destination)

	resp = b.do(t, "GET", channelsPath, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.NotContains(t, string(resp.Body), "secretpath")
	require.NotContains(t, string(resp.Body), key)
	var list []channelJSON
	resp.JSON(t, &list)
	require.Len(t, list, 2)
	require.Equal(t, slack.ID, list[0].ID)

	// Test sends through the same sender; PagerDuty gets a trigger then a
	// resolve.
	resp = b.do(t, "POST", channelsPath+"/"+slack.ID+"/test", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var res struct {
		Status     string  `json:"status"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}
	resp.JSON(t, &res)
	require.Equal(t, "delivered", res.Status)
	require.Equal(t, 200, *res.StatusCode)
	require.Nil(t, res.Error)
	require.Len(t, chat.received(), 1)
	require.Contains(t, chat.received()[0], `"blocks"`)
	resp = b.do(t, "POST", channelsPath+"/"+pd.ID+"/test", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	got := chat.received()
	require.Len(t, got, 3)
	require.Contains(t, got[1], `"event_action":"trigger"`)
	require.Contains(t, got[1], `"routing_key":"`+key+`"`)
	require.Contains(t, got[2], `"event_action":"resolve"`)

	// Another account sees none of them.
	for _, c := range []struct{ method, path string }{
		{"GET", channelsPath + "/" + slack.ID}, {"DELETE", channelsPath + "/" + slack.ID}, {"POST", channelsPath + "/" + slack.ID + "/test"},
	} {
		resp = b.do(t, c.method, c.path, other.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s %s", c.method, c.path)
	}
	resp = b.do(t, "GET", channelsPath, other.Key, nil)
	require.JSONEq(t, `[]`, string(resp.Body))

	resp = b.do(t, "GET", channelsPath+"/"+slack.ID, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp = b.do(t, "DELETE", channelsPath+"/"+slack.ID, acct.Key, nil)
	require.Equal(t, http.StatusNoContent, resp.Status)
	resp = b.do(t, "DELETE", channelsPath+"/"+slack.ID, acct.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status)
}

// TestNotificationChannelTestFailure: a refused test message reports the
// status and what the destination said.
func TestNotificationChannelTestFailure(t *testing.T) {
	t.Parallel()
	chat := newChatServer(t, http.StatusBadRequest)
	b := setup(t, withChannelHosts(t, strings.TrimPrefix(chat.URL, "http://")))
	acct := b.createAccount(t)
	resp := b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "teams", "url": chat.URL + "/workflows/x"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var ch channelJSON
	resp.JSON(t, &ch)
	resp = b.do(t, "POST", channelsPath+"/"+ch.ID+"/test", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, `{"status":"failed","status_code":400,"error":"Microsoft Teams answered 400 Bad Request: invalid_payload"}`, string(resp.Body))
	var card map[string]any
	require.NoError(t, json.Unmarshal([]byte(chat.received()[0]), &card))
	require.Equal(t, "message", card["type"])
}

// TestNotificationChannelHosts: a destination outside the kind's hosts is
// 422 naming url; CHANNEL_ALLOWED_HOSTS replaces the built-in lists.
func TestNotificationChannelHosts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	for _, body := range []map[string]any{
		{"kind": "slack", "url": "https://example.com/services/x"},
		{"kind": "slack", "url": "http://hooks.slack.com/services/x"},
		{"kind": "teams", "url": "https://hooks.slack.com/services/x"},
		{"kind": "pagerduty", "routing_key": strings.Repeat("a", 32), "url": "https://127.0.0.1/v2/enqueue"},
	} {
		resp := b.do(t, "POST", channelsPath, acct.Key, body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%v: %s", body, resp.Body)
		var e struct {
			Detail string `json:"detail"`
			Errors []struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		resp.JSON(t, &e)
		require.NotEmpty(t, e.Detail)
		require.Len(t, e.Errors, 1)
		require.Equal(t, "url", e.Errors[0].Field)
	}
	resp := b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "slack", "url": "https://hooks.slack.com/services/T0/B0/x"})
	require.Equal(t, http.StatusCreated, resp.Status, "the built-in Slack host: %s", resp.Body)
	resp = b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "pagerduty", "routing_key": "short"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Contains(t, string(resp.Body), `"routing_key"`)

	// The override replaces the lists: only its host passes.
	o := setup(t, withChannelHosts(t, "127.0.0.1:9"))
	acct = o.createAccount(t)
	resp = o.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "slack", "url": "http://127.0.0.1:9/hook"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	resp = o.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "slack", "url": "https://hooks.slack.com/services/T0/B0/x"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Contains(t, resp.Detail(t), "127.0.0.1:9")
}

// TestNotificationChannelUpdate: PATCH changes the name and the routing
// filters, checked as at creation; null clears a filter; the destination
// stays; another account's channel is 404.
func TestNotificationChannelUpdate(t *testing.T) {
	t.Parallel()
	chat := newChatServer(t, http.StatusOK)
	b := setup(t, withChannelHosts(t, strings.TrimPrefix(chat.URL, "http://")))
	acct, other := b.createAccount(t), b.createAccount(t)
	resp := b.do(t, "POST", channelsPath, acct.Key, map[string]any{"kind": "slack", "url": chat.URL + "/services/T0/B0/x",
		"label": "#ops", "domain_filter": "example.com", "groups": []string{"health"}})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var ch channelJSON
	resp.JSON(t, &ch)
	path := channelsPath + "/" + ch.ID

	resp = b.do(t, "PATCH", path, acct.Key, map[string]any{"label": "  #oncall ", "min_severity": "warning", "groups": nil})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var got struct {
		channelJSON
		DomainFilter *string `json:"domain_filter"`
	}
	resp.JSON(t, &got)
	require.Equal(t, "#oncall", got.Label)
	require.Equal(t, "warning", got.MinSeverity)
	require.Nil(t, got.Groups, "null: every group")
	require.Equal(t, "example.com", *got.DomainFilter, "absent fields stay")
	require.Equal(t, ch.Destination, got.Destination)

	resp = b.do(t, "PATCH", path, acct.Key, map[string]any{"domain_filter": nil})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &got)
	require.Nil(t, got.DomainFilter)

	for body, field := range map[string]string{
		`{"groups": ["nosuchgroup"]}`: "groups",
		`{"min_severity": "loud"}`:    "min_severity",
		`{"tag_filter": "  "}`:        "tag_filter",
	} {
		resp = b.do(t, "PATCH", path, acct.Key, []byte(body))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", body, resp.Body)
		require.Contains(t, resp.Detail(t), field)
	}
	resp = b.do(t, "PATCH", path, acct.Key, []byte(`{}`))
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "an empty change is refused: %s", resp.Body)
	resp = b.do(t, "PATCH", path, other.Key, map[string]any{"label": "x"})
	require.Equal(t, http.StatusNotFound, resp.Status)
}
