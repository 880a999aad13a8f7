package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDashboardChannels: the settings page adds a Slack channel, sends it
// a test message, shows a channel that has been failing with its last
// error, and removes it, through the notification-channel operations.
func TestDashboardChannels(t *testing.T) {
	t.Parallel()
	chat := newChatServer(t, http.StatusOK)
	b := setup(t, withChannelHosts(t, strings.TrimPrefix(chat.URL, "http://")))
	acct := b.createAccount(t)
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	_, page := w.req("GET", "/settings", nil)
	tok := csrfAttr.FindStringSubmatch(page)[1]
	require.Contains(t, page, "No channels: alerts go by email")

	resp, _ := w.req("POST", "/settings/channels", url.Values{"csrf": {tok}, "kind": {"slack"}, "label": {"#ops"},
		"url": {chat.URL + "/services/T0/B0/secretpath"}, "min_severity": {"warning"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var list []channelJSON
	b.do(t, "GET", channelsPath, acct.Key, nil).JSON(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, "warning", list[0].MinSeverity)
	_, page = w.req("GET", "/settings", nil)
	require.Contains(t, page, "slack channel #ops added")
	require.Contains(t, page, "nothing sent yet")
	require.NotContains(t, page, "secretpath", "the webhook URL is never shown again")

	w.req("POST", "/settings/channels/"+list[0].ID+"/test", url.Values{"csrf": {tok}})
	_, page = w.req("GET", "/settings", nil)
	require.Contains(t, page, "test message delivered")
	require.Len(t, chat.received(), 1)

	// A channel failing for a day shows so, with what it last got.
	_, err := b.db.Exec(context.Background(), `UPDATE notification_channels SET failing_since = now() - interval '25 hours',
		last_error = 'Slack answered 404 Not Found: no_service' WHERE id = $1`, list[0].ID)
	require.NoError(t, err)
	_, page = w.req("GET", "/settings", nil)
	require.Regexp(t, `(?s)id="channel-list".*st-fail">failing</span> since`, page)
	require.Contains(t, page, "Slack answered 404 Not Found: no_service")

	// A destination outside the kind's hosts is refused with the API's reason.
	w.req("POST", "/settings/channels", url.Values{"csrf": {tok}, "kind": {"slack"}, "url": {"https://example.com/hook"}})
	_, page = w.req("GET", "/settings", nil)
	require.Contains(t, page, `class="problem"`)

	w.req("POST", "/settings/channels/"+list[0].ID+"/delete", url.Values{"csrf": {tok}})
	b.do(t, "GET", channelsPath, acct.Key, nil).JSON(t, &list)
	require.Empty(t, list)
}
