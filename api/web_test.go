package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/web"
)

// webClient drives the dashboard through app.Test, keeping cookies like a
// browser on the same origin would.
type webClient struct {
	t       *testing.T
	b       *testBundle
	cookies map[string]*http.Cookie
	// ip, when set, is sent as X-Forwarded-For (a server built with
	// trustedAppTest takes it as the client IP).
	ip string
}

func newWebClient(t *testing.T, b *testBundle) *webClient {
	return &webClient{t: t, b: b, cookies: map[string]*http.Cookie{}}
}

func (w *webClient) req(method, path string, form url.Values) (*http.Response, string) {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://mailwatch.test"+path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://mailwatch.test")
	}
	for _, c := range w.cookies {
		r.AddCookie(c)
	}
	if w.ip != "" {
		r.Header.Set("X-Forwarded-For", w.ip)
	}
	resp, err := w.b.srv.App().Test(r, -1)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || (!c.Expires.IsZero() && c.Expires.Unix() <= 1) {
			delete(w.cookies, c.Name)
		} else {
			w.cookies[c.Name] = c
		}
	}
	page, _ := io.ReadAll(resp.Body)
	return resp, string(page)
}

var csrfAttr = regexp.MustCompile(`data-csrf="([^"]+)"`)

func (w *webClient) csrf(path string) string {
	w.t.Helper()
	_, page := w.req("GET", path, nil)
	m := csrfAttr.FindStringSubmatch(page)
	require.NotNil(w.t, m, "%s", page)
	return m[1]
}

func (w *webClient) signIn(email, password string) (*http.Response, string) {
	w.t.Helper()
	tok := w.csrf("/signin")
	return w.req("POST", "/signin", url.Values{"csrf": {tok}, "email": {email}, "password": {password}})
}

func TestDashboardSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)

	t.Run("RequestsAreLimitedPerAccount", func(t *testing.T) {
		busy := b.createAccount(t)
		w := newWebClient(t, b)
		w.signIn(busy.Email, "correct horse battery")
		for i := range web.RequestsPerMinute {
			resp, body := w.req("GET", "/ui/events", nil)
			if resp.StatusCode == http.StatusTooManyRequests {
				// A minute boundary mid-loop resets the window; only an
				// early refusal within the budget is a failure.
				require.Greater(t, i, web.RequestsPerMinute/2, "%s", body)
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		}
		resp, body := w.req("GET", "/ui/events", nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		require.Contains(t, body, "too many dashboard requests")
		// Another account's session is not affected.
		o := newWebClient(t, b)
		o.signIn(acct.Email, "correct horse battery")
		resp, _ = o.req("GET", "/ui/events", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("PagesNeedASession", func(t *testing.T) {
		w := newWebClient(t, b)
		resp, _ := w.req("GET", "/domains", nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/signin?next=%2Fdomains", resp.Header.Get("Location"))
		resp, _ = w.req("GET", "/ui/events", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		resp, _ = w.req("POST", "/settings/api-keys", url.Values{"label": {"x"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})

	t.Run("SignUpAppliesTheAPIRules", func(t *testing.T) {
		w := newWebClient(t, b)
		tok := w.csrf("/signup")
		resp, page := w.req("POST", "/signup", url.Values{"csrf": {tok}, "email": {"not-an-email"}, "password": {"short"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, page, "must be a valid email address")
		resp, page = w.req("POST", "/signup", url.Values{"csrf": {tok}, "email": {acct.Email}, "password": {"long enough password"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, page, "already exists")
		resp, _ = w.req("POST", "/signup", url.Values{"csrf": {"wrong"}, "email": {"new@example.com"}, "password": {"long enough password"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "the sign-up form is CSRF-protected too")
	})

	t.Run("SignInSignOut", func(t *testing.T) {
		w := newWebClient(t, b)
		resp, _ := w.signIn(acct.Email, "correct horse battery")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Contains(t, w.cookies, "mw_session")
		var hash []byte
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT token_hash FROM web_sessions WHERE account_id = $1`, acct.ID).Scan(&hash))
		require.Len(t, hash, 32, "only the token's hash is stored")
		require.NotContains(t, string(hash), w.cookies["mw_session"].Value)
		resp, page := w.req("GET", "/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, page, acct.Email)
		tok := csrfAttr.FindStringSubmatch(page)[1]
		resp, _ = w.req("POST", "/signout", url.Values{"csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, _ = w.req("GET", "/", nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out")
	})

	t.Run("CredentialChangeEndsSessions", func(t *testing.T) {
		w := newWebClient(t, b)
		w.signIn(acct.Email, "correct horse battery")
		resp, _ := w.req("GET", "/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var n int
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE account_id = $1`, acct.ID).Scan(&n))
		require.GreaterOrEqual(t, n, 1)
		require.NoError(t, accounts.EndSessions(context.Background(), b.db, uuid.MustParse(acct.ID)))
		resp, _ = w.req("GET", "/", nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the session ended")
	})

	t.Run("MetricsLabelTheDashboardRoot", func(t *testing.T) {
		w := newWebClient(t, b)
		w.signIn(acct.Email, "correct horse battery")
		w.req("GET", "/", nil)
		w.req("GET", "/no-such-page", nil)
		_, body := w.req("GET", "/metrics", nil)
		require.Regexp(t, `mailwatch_http_requests_total\{method="GET",route="/",status="200"\} \d`, body)
		require.Regexp(t, `mailwatch_http_requests_total\{method="GET",route="unmatched",status="404"\} \d`, body)
	})
}

// TestDashboardSignInThrottle: failed sign-ins are limited per account and
// per client IP; a correct password is refused too while throttled.
func TestDashboardSignInThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct, other := b.createAccount(t), b.createAccount(t)
	w := newWebClient(t, b)
	for i := 0; i < 10; i++ {
		resp, page := w.signIn(acct.Email, "wrong password!")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%d: %s", i, page)
	}
	resp, page := w.signIn(acct.Email, "correct horse battery")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, page, "too many failed sign-ins")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	// Another account from the same IP still signs in, until the IP's own
	// budget (20) is spent.
	resp, _ = newWebClient(t, b).signIn(other.Email, "correct horse battery")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	for i := 0; i < 10; i++ {
		w.signIn("nobody-"+uuid.NewString()+"@example.com", "wrong password!")
	}
	resp, _ = w.signIn(other.Email, "correct horse battery")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the IP's budget is spent")
}

// TestDashboardAccountState: a session follows its account. A password
// change through the API ends every dashboard session (a data-API token's
// rule, applied to sessions); a suspended account's session gets 403 with
// the suspension's reason on pages and actions but may still sign out; an
// account being deleted is signed out.
func TestDashboardAccountState(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("PasswordChangeEndsSessions", func(t *testing.T) {
		acct := b.createAccount(t)
		w, other := newWebClient(t, b), newWebClient(t, b)
		w.signIn(acct.Email, "correct horse battery")
		other.signIn(acct.Email, "correct horse battery")
		resp, _ := w.req("GET", "/settings", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// An email change alone keeps the sessions.
		require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", acct.Key, map[string]any{"email": "renamed-" + acct.Email}).Status)
		resp, _ = w.req("GET", "/settings", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", acct.Key, map[string]any{"password": "a brand new password"}).Status)
		for _, c := range []*webClient{w, other} {
			resp, _ = c.req("GET", "/settings", nil)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out by the password change")
			require.Equal(t, "/signin?next=%2Fsettings", resp.Header.Get("Location"))
		}
		var n int
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE account_id = $1`, acct.ID).Scan(&n))
		require.Zero(t, n)
		resp, _ = w.signIn("renamed-"+acct.Email, "correct horse battery")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the old password is gone")
		resp, _ = w.signIn("renamed-"+acct.Email, "a brand new password")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, _ = w.req("GET", "/settings", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("SuspensionIs403", func(t *testing.T) {
		admin, acct := b.createAccount(t), b.createAccount(t)
		b.makeAdmin(t, admin)
		w := newWebClient(t, b)
		w.signIn(acct.Email, "correct horse battery")
		tok := w.csrf("/settings")
		resp := b.do(t, "POST", "/api/admin/accounts/"+acct.ID+"/suspend", admin.Key, map[string]any{"reason": "unpaid invoices since March"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		for _, path := range []string{"/", "/settings", "/domains"} {
			resp, page := w.req("GET", path, nil)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
			require.Contains(t, page, "unpaid invoices since March", path)
			require.NotContains(t, page, `href="/domains"`, "no navigation into pages that refuse")
		}
		resp2, body := w.req("POST", "/settings/api-keys", url.Values{"csrf": {tok}, "label": {"x"}})
		require.Equal(t, http.StatusForbidden, resp2.StatusCode)
		require.Contains(t, body, "unpaid invoices since March")
		resp2, _ = w.req("GET", "/ui/events", nil)
		require.Equal(t, http.StatusForbidden, resp2.StatusCode)
		// Signing out still works.
		resp2, _ = w.req("POST", "/signout", url.Values{"csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, resp2.StatusCode)
		require.NotContains(t, w.cookies, "mw_session")
		// Unsuspended: a new sign-in works again.
		require.Equal(t, http.StatusOK, b.do(t, "POST", "/api/admin/accounts/"+acct.ID+"/unsuspend", admin.Key, nil).Status)
		w.signIn(acct.Email, "correct horse battery")
		resp2, _ = w.req("GET", "/settings", nil)
		require.Equal(t, http.StatusOK, resp2.StatusCode)
	})

	t.Run("DeletionSignsOut", func(t *testing.T) {
		acct := b.createAccount(t)
		w := newWebClient(t, b)
		w.signIn(acct.Email, "correct horse battery")
		resp, _ := w.req("GET", "/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, http.StatusAccepted, b.do(t, "DELETE", "/api/accounts/me", acct.Key, nil).Status)
		resp, _ = w.req("GET", "/", nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out")
		require.NotContains(t, w.cookies, "mw_session", "the cookie is cleared")
		resp, _ = w.req("GET", "/ui/events", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

// TestDashboardSettings: the settings page shows and changes notification
// preferences (mutes, group switches; required groups cannot change),
// manages notification addresses, and shows the plan, all through the
// preference and plan endpoints (the API sees the same state).
func TestDashboardSettings(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now().UTC()}
	b := setup(t, func(o *setupOpts) { o.now = clock.Now })
	acct := b.createAccount(t)
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	resp, page := w.req("GET", "/settings", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tok := csrfAttr.FindStringSubmatch(page)[1]
	require.Contains(t, page, `id="group-health"`)
	require.Regexp(t, `(?s)id="group-audit".*?checked disabled.*?Required: always sent`, page)
	require.Regexp(t, `(?s)id="plan-name">free<`, page)
	require.Regexp(t, `(?s)id="billing-status"[^>]*>active<`, page)
	require.Contains(t, page, acct.Email, "the sign-in address is listed")
	require.Contains(t, page, "not verified")

	apiPrefs := func() prefsJSON { return b.prefs(t, "GET", "/api/accounts/me/preferences", acct.Key, nil) }
	group := func(p prefsJSON, name string) (email, webhook bool) {
		for _, g := range p.Groups {
			if g.Name == name {
				return g.Channels.Email, g.Channels.Webhook
			}
		}
		t.Fatalf("no group %s", name)
		return
	}

	// form is the preference table as a browser submits it: every group's
	// checked boxes, with change applied.
	form := func(change func(url.Values)) url.Values {
		v := url.Values{"csrf": {tok}}
		for _, g := range apiPrefs().Groups {
			if g.Channels.Email {
				v.Set("email:"+g.Name, "on")
			}
			if g.Channels.Webhook {
				v.Set("webhook:"+g.Name, "on")
			}
		}
		change(v)
		return v
	}
	t.Run("GroupSwitch", func(t *testing.T) {
		// Unchecked email, checked webhook; the other groups as they were.
		resp, _ := w.req("POST", "/settings/preferences/groups", form(func(v url.Values) { v.Del("email:health") }))
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/settings#preferences", resp.Header.Get("Location"))
		e, h := group(apiPrefs(), "health")
		require.False(t, e)
		require.True(t, h)
		e, h = group(apiPrefs(), "sending")
		require.True(t, e && h, "the other groups are unchanged")
		_, page := w.req("GET", "/settings", nil)
		require.Contains(t, page, "preferences saved")
		require.Regexp(t, `(?s)id="group-health".*?name="email:health" >`, page, "shown unchecked")
		w.req("POST", "/settings/preferences/groups", form(func(v url.Values) { v.Set("email:health", "on") }))
		e, _ = group(apiPrefs(), "health")
		require.True(t, e)
		// Nothing changed: nothing is written.
		w.req("POST", "/settings/preferences/groups", form(func(url.Values) {}))
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, "nothing changed")
	})

	t.Run("RequiredGroupCannotChange", func(t *testing.T) {
		// A forged form without the audit group's boxes leaves it on.
		w.req("POST", "/settings/preferences/groups", form(func(v url.Values) { v.Del("email:audit"); v.Del("webhook:audit") }))
		e, h := group(apiPrefs(), "audit")
		require.True(t, e && h)
		resp, _ := w.req("POST", "/settings/preferences/groups", url.Values{"csrf": {"wrong"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "CSRF-protected")
	})

	t.Run("Mutes", func(t *testing.T) {
		w.req("POST", "/settings/preferences/mutes", url.Values{"csrf": {tok}, "email": {"on"}})
		p := apiPrefs()
		require.True(t, p.Mutes.Email)
		require.False(t, p.Mutes.Webhook)
		_, page := w.req("GET", "/settings", nil)
		require.Contains(t, page, `id="mute-email" checked`)
		w.req("POST", "/settings/preferences/mutes", url.Values{"csrf": {tok}})
		require.False(t, apiPrefs().Mutes.Email)
	})

	t.Run("Overrides", func(t *testing.T) {
		off := false
		require.Equal(t, http.StatusOK, b.do(t, "PUT", "/api/accounts/me/preferences/overrides/dmarc_report_received", acct.Key,
			map[string]any{"email": off}).Status)
		_, page := w.req("GET", "/settings", nil)
		require.Regexp(t, `(?s)id="overrides".*dmarc_report_received</span>: email off, webhook from the group`, page)
	})

	t.Run("Addresses", func(t *testing.T) {
		opsEmail := "ops-" + acct.Email
		resp, _ := w.req("POST", "/settings/notification-addresses", url.Values{"csrf": {tok}, "email": {strings.ToUpper(opsEmail)}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		var list []struct {
			ID       string `json:"id"`
			Email    string `json:"email"`
			Verified bool   `json:"verified"`
		}
		b.do(t, "GET", "/api/accounts/me/notification-addresses", acct.Key, nil).JSON(t, &list)
		var ops string
		for _, a := range list {
			if a.Email == opsEmail {
				ops = a.ID
			}
		}
		require.NotEmpty(t, ops, "%v", list)
		require.Equal(t, 1, b.verifyJobs(t, ops))
		_, page := w.req("GET", "/settings", nil)
		require.Contains(t, page, opsEmail+" added")
		w.req("POST", "/settings/notification-addresses", url.Values{"csrf": {tok}, "email": {opsEmail}})
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, `class="problem"`, "the API's 409")
		w.req("POST", "/settings/notification-addresses/"+ops+"/resend", url.Values{"csrf": {tok}})
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, "less than a minute ago", "the API's 429")
		require.Equal(t, 1, b.verifyJobs(t, ops))
		clock.Add(notify.RecipientCooldown)
		w.req("POST", "/settings/notification-addresses/"+ops+"/resend", url.Values{"csrf": {tok}})
		require.Equal(t, 2, b.verifyJobs(t, ops))
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, "a new verification mail is on its way to "+opsEmail)
		w.req("POST", "/settings/notification-addresses/"+ops+"/remove", url.Values{"csrf": {tok}})
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, "address removed")
		require.NotContains(t, page, opsEmail+"</td>")
		// Another account's address is 404 here as in the API.
		other := b.createAccount(t)
		var theirs []struct {
			ID string `json:"id"`
		}
		b.do(t, "GET", "/api/accounts/me/notification-addresses", other.Key, nil).JSON(t, &theirs)
		require.NotEmpty(t, theirs)
		w.req("POST", "/settings/notification-addresses/"+theirs[0].ID+"/remove", url.Values{"csrf": {tok}})
		_, page = w.req("GET", "/settings", nil)
		require.Contains(t, page, "notification address not found")
		b.do(t, "GET", "/api/accounts/me/notification-addresses", other.Key, nil).JSON(t, &theirs)
		require.NotEmpty(t, theirs, "untouched")
	})

	t.Run("PlanUsage", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "plan-usage.example"}).Status)
		_, page := w.req("GET", "/settings", nil)
		require.Regexp(t, `(?s)id="plan-usage".*?Domains</th><td>1</td><td>\d+</td>`, page)
	})
}

// TestDashboardVerifyAddress: the verification mail's link opens a page
// with a button; only its POST (CSRF double-submit, no session needed)
// verifies, through the verify endpoint. A GET never does: mail scanners
// follow links.
func TestDashboardVerifyAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	var list []struct {
		ID       string `json:"id"`
		Verified bool   `json:"verified"`
	}
	verified := func() bool {
		b.do(t, "GET", "/api/accounts/me/notification-addresses", acct.Key, nil).JSON(t, &list)
		require.Len(t, list, 1)
		return list[0].Verified
	}
	require.False(t, verified())
	token := b.newToken(t, list[0].ID)

	w := newWebClient(t, b) // not signed in
	resp, page := w.req("GET", "/notifications/verify?token="+url.QueryEscape(token), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Verify this address")
	require.Contains(t, page, `name="token" value="`+token+`"`)
	w.req("GET", "/notifications/verify?token="+url.QueryEscape(token), nil)
	require.False(t, verified(), "a GET never verifies")

	resp, _ = w.req("POST", "/notifications/verify", url.Values{"csrf": {"wrong"}, "token": {token}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.False(t, verified())

	tok := w.csrf("/notifications/verify?token=" + url.QueryEscape(token))
	resp, page = w.req("POST", "/notifications/verify", url.Values{"csrf": {tok}, "token": {token}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	require.Contains(t, page, acct.Email+"</strong> is verified")
	require.True(t, verified())

	resp, page = w.req("POST", "/notifications/verify", url.Values{"csrf": {tok}, "token": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "single use")
	require.Contains(t, page, "unknown, already used or expired")

	resp, _ = w.req("GET", "/notifications/verify", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestDashboardAlertLink: /alerts?event=<id>, where the alert mail links,
// lists all alerts (the linked one may be acknowledged by now) and marks
// the linked one for the page's script to scroll to.
func TestDashboardAlertLink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	first := b.emit(t, acct.ID, events.Event{Type: events.TypeHealthScoreChanged, Severity: events.SeverityCritical, Domain: "a.example"})
	second := b.emit(t, acct.ID, events.Event{Type: events.TypeHealthScoreChanged, Severity: events.SeverityCritical, Domain: "b.example"})
	require.Equal(t, http.StatusOK, b.do(t, "POST", "/api/accounts/me/alerts/"+first.ID.String()+"/acknowledge", acct.Key,
		map[string]any{"acknowledged_by": "alice"}).Status)
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")

	_, page := w.req("GET", "/alerts", nil)
	require.NotContains(t, page, "alert-"+first.ID.String(), "open alerts only by default")
	require.NotContains(t, page, " target")

	resp, page := w.req("GET", "/alerts?event="+first.ID.String(), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<article class="card alert target" id="alert-`+first.ID.String()+`" tabindex="-1" aria-current="true">`)
	require.Contains(t, page, `<article class="card alert" id="alert-`+second.ID.String()+`">`, "the others are not marked")
	require.NotContains(t, page, `class="problem"`)

	_, page = w.req("GET", "/alerts?event="+uuid.NewString(), nil)
	require.Contains(t, page, "the alert this link names is not in this list")
	require.NotContains(t, page, "alert target")
}
