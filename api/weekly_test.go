package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// TestWeeklyDigestSettings: defaults, a change read back normalised, and
// refusals with the field; each account has its own.
func TestWeeklyDigestSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	const path = "/api/accounts/me/weekly-digest"
	get := func(key string) api.WeeklyDigestSettings {
		t.Helper()
		resp := b.do(t, "GET", path, key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var s api.WeeklyDigestSettings
		resp.JSON(t, &s)
		return s
	}
	s := get(acct.Key)
	require.True(t, *s.Enabled)
	require.False(t, *s.ReplaceDaily)
	require.Equal(t, []string{}, s.Domains)

	resp := b.do(t, "PUT", path, acct.Key, `{"enabled":true,"domains":["Example.COM.","example.com"],"tags":[" prod "],"replace_daily":true}`)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	s = get(acct.Key)
	require.Equal(t, []string{"example.com"}, s.Domains)
	require.Equal(t, []string{"prod"}, s.Tags)
	require.True(t, *s.ReplaceDaily)
	require.True(t, *get(b.createAccount(t).Key).Enabled, "another account keeps its defaults")

	resp = b.do(t, "PUT", path, acct.Key, `{"enabled":true,"domains":["not a domain"],"tags":[],"replace_daily":false}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "domains")
	resp = b.do(t, "PUT", path, acct.Key, `{"enabled":true,"domains":[],"tags":[]}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "replace_daily is required: %s", resp.Body)
	require.Equal(t, []string{"example.com"}, get(acct.Key).Domains, "a refused change changes nothing")

	// The settings page's form sets the same settings.
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	_, page := w.req("GET", "/settings", nil)
	require.Contains(t, page, `id="weekly-domains" name="domains" value="example.com"`)
	tok := csrfAttr.FindStringSubmatch(page)[1]
	r, _ := w.req("POST", "/settings/weekly-digest", url.Values{"csrf": {tok}, "enabled": {"on"}, "domains": {""}, "tags": {"prod, eu"}})
	require.Equal(t, http.StatusSeeOther, r.StatusCode)
	s = get(acct.Key)
	require.True(t, *s.Enabled)
	require.False(t, *s.ReplaceDaily, "an unticked box is off")
	require.Equal(t, []string{}, s.Domains)
	require.Equal(t, []string{"eu", "prod"}, s.Tags)
	w.req("POST", "/settings/weekly-digest", url.Values{"csrf": {tok}, "domains": {"not a domain"}})
	_, page = w.req("GET", "/settings", nil)
	require.Contains(t, page, "not a domain", "the API's detail, shown on the next page")
	require.Equal(t, []string{"eu", "prod"}, get(acct.Key).Tags, "a refused form changes nothing")
}
