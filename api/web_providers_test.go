package api_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDashboardProviders covers the sending providers page over HTTP: a
// provider connected through the form (its secret never rendered, another
// kind's field ignored), the ingress URL and setup steps shown, a refused
// form with the API's detail and without the secret, domains linked and
// unlinked, the last day's outcomes after a signed webhook, the suppression
// check, manual add and remove, and another account's provider left alone.
func TestDashboardProviders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	b.addDomain(t, acct.Key, "send.example.com")
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")

	resp, page := w.req("GET", "/providers", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "No sending providers yet.")
	require.Contains(t, page, `<a href="/providers" aria-current="page">Providers</a>`)
	require.Contains(t, page, "No message events in the last 24 hours.")
	tok := csrfAttr.FindStringSubmatch(page)[1]

	listAPI := func() []providerJSON {
		var ps []providerJSON
		r := b.do(t, "GET", providersPath, acct.Key, nil)
		require.Equal(t, http.StatusOK, r.Status)
		r.JSON(t, &ps)
		return ps
	}

	key := newSendgridKey(t)
	const stray = "whsec_typed-under-another-kind"
	var id string
	t.Run("Create", func(t *testing.T) {
		resp, page := w.req("POST", "/providers", url.Values{"csrf": {tok}, "kind": {"sendgrid"}, "label": {"Main SendGrid"},
			"public_key": {key.pub}, "signing_secret": {stray}})
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", page)
		ps := listAPI()
		require.Len(t, ps, 1)
		id = ps[0].ID
		require.Equal(t, []string{"public_key"}, ps[0].ConfiguredFields, "only the chosen kind's field was sent")
		require.Regexp(t, `(?s)id="created-provider".*?id="ingress-url" class="mono" readonly value="`+regexp.QuoteMeta(ps[0].IngressURL)+`"`, page)
		require.Contains(t, ps[0].IngressURL, "/api/webhooks/providers/"+id)
		require.Contains(t, page, `id="setup-steps"`)
		for _, step := range ps[0].SetupSteps {
			require.Contains(t, page, htmlText(step))
		}
		require.NotContains(t, page, key.pub, "verification material is never shown")
		require.NotContains(t, page, stray)

		_, page = w.req("GET", "/providers", nil)
		require.Contains(t, page, `id="p-`+id+`"`)
		require.NotContains(t, page, `id="created-provider"`, "the setup box is part of the create answer only")
		require.NotContains(t, page, key.pub)
	})

	t.Run("RefusedKeepsLabelNotSecret", func(t *testing.T) {
		resp, page := w.req("POST", "/providers", url.Values{"csrf": {tok}, "kind": {"postmark"}, "label": {"PM hooks"},
			"basic_auth_user": {"hook"}, "basic_auth_password": {"short-pw"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, page, "basic_auth_password")
		require.Contains(t, page, `value="PM hooks"`)
		require.Contains(t, page, `<option selected>postmark</option>`)
		require.NotContains(t, page, "short-pw")
		require.Len(t, listAPI(), 1)

		resp, _ = w.req("POST", "/providers", url.Values{"csrf": {"wrong"}, "kind": {"mailgun"}, "label": {"x"}, "signing_key": {"k"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "CSRF-protected")
	})

	t.Run("Links", func(t *testing.T) {
		resp, _ := w.req("POST", "/providers/"+id+"/links", url.Values{"csrf": {tok}, "domain": {"send.example.com"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/providers#p-"+id, resp.Header.Get("Location"))
		require.Equal(t, []string{"send.example.com"}, listAPI()[0].LinkedDomains)
		_, page := w.req("GET", "/providers", nil)
		require.Contains(t, page, "linked send.example.com")
		require.Regexp(t, `(?s)id="links-`+id+`">\s*<li><span class="mono">send.example.com</span>`, page)

		w.req("POST", "/providers/"+id+"/links", url.Values{"csrf": {tok}, "domain": {"not-mine.example"}})
		_, page = w.req("GET", "/providers", nil)
		require.Contains(t, page, "is not a registered domain of the account", "the API's detail")

		w.req("POST", "/providers/"+id+"/links/remove", url.Values{"csrf": {tok}, "domain": {"send.example.com"}})
		require.Empty(t, listAPI()[0].LinkedDomains)
		_, page = w.req("GET", "/providers", nil)
		require.Contains(t, page, "unlinked send.example.com")
		w.req("POST", "/providers/"+id+"/links", url.Values{"csrf": {tok}, "domain": {"send.example.com"}})
	})

	t.Run("Last24Hours", func(t *testing.T) {
		body := sendgridBatch(t, "web", 3, func(i int) map[string]any {
			if i == 2 {
				return map[string]any{"email": "gone@send.example.com", "event": "bounce", "type": "bounce", "reason": "550 5.1.1 no such user"}
			}
			return map[string]any{"email": "ok@send.example.com", "event": "delivered"}
		})
		require.Equal(t, http.StatusOK, b.ingress(t, id, body, key.headers(t, body)).Status)
		b.normaliseAll(t)
		_, page := w.req("GET", "/providers", nil)
		require.Regexp(t, `(?s)id="outcomes".*?<th scope="row">delivered</th><td>2</td><td>sendgrid 2 </td>`, page)
		require.Regexp(t, `(?s)id="outcomes".*?<th scope="row">bounced</th><td>1</td>`, page)
		// The overview charts the day: 2 delivered and 1 bounced of 3
		// recipients, a bounce rate of 33.33% against the 5% level.
		_, page = w.req("GET", "/", nil)
		require.Contains(t, page, `id="mail-chart"`)
		require.Contains(t, page, "3 recipients over 14 days, by outcome.")
		require.Regexp(t, `(?s)id="mail-chart".*?<td>2</td><td>0</td><td>1</td></tr></tbody>`, page, "today's row: delivered, complaints, bounced")
		require.Regexp(t, `(?s)id="rates-chart".*?<td>33.33%</td><td>0%</td></tr></tbody>`, page)
		require.Contains(t, page, ">bounces 5%</text>")

		_, page = w.req("GET", "/providers?check="+url.QueryEscape("GONE@send.example.com"), nil)
		require.Regexp(t, `(?s)id="check-result">.*?is suppressed: hard_bounce since`, page, "the hard bounce suppressed it")
	})

	t.Run("Suppressions", func(t *testing.T) {
		resp, _ := w.req("POST", "/suppressions", url.Values{"csrf": {tok}, "email": {"Manual@Example.org"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		_, page := w.req("GET", "/providers?check=manual%40example.org", nil)
		require.Contains(t, page, "Manual@Example.org suppressed")
		require.Regexp(t, `(?s)id="check-result">.*?is suppressed: manual since`, page)
		r := b.do(t, "GET", "/api/accounts/me/suppressions/check?email=manual@example.org", acct.Key, nil)
		require.Contains(t, string(r.Body), `"suppressed":true`)

		w.req("POST", "/suppressions/remove", url.Values{"csrf": {tok}, "email": {"manual@example.org"}})
		_, page = w.req("GET", "/providers?check=manual%40example.org", nil)
		require.Regexp(t, `(?s)id="check-result">.*?is not suppressed`, page)

		resp, page = w.req("GET", "/providers?check=not-an-address", nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, page, `class="problem"`)
	})

	t.Run("OtherAccountsProvider", func(t *testing.T) {
		other := b.createAccount(t)
		theirs := b.createProvider(t, other.Key, "mailgun", "theirs", map[string]any{"signing_key": "key-theirs-0123456789"})
		w.req("POST", "/providers/"+theirs.ID+"/delete", url.Values{"csrf": {tok}})
		_, page := w.req("GET", "/providers", nil)
		require.Contains(t, page, "sending provider not found")
		require.NotContains(t, page, theirs.ID)
		r := b.do(t, "GET", providersPath+"/"+theirs.ID, other.Key, nil)
		require.Equal(t, http.StatusOK, r.Status, "untouched")
	})

	t.Run("Delete", func(t *testing.T) {
		resp, _ := w.req("POST", "/providers/"+id+"/delete", url.Values{"csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Empty(t, listAPI())
		_, page := w.req("GET", "/providers", nil)
		require.Contains(t, page, "sending provider deleted")
	})
}

// htmlText escapes s as html/template escapes text.
func htmlText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "+", "&#43;")
	return r.Replace(s)
}
