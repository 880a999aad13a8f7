package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// domainBundle is an API server whose DNS checks ask a loopback DNS server.
type domainBundle struct {
	*testBundle
	dns *dnstest.Server
}

func domainSetup(t *testing.T, zone string, opts ...func(*setupOpts)) *domainBundle {
	t.Helper()
	srv := dnstest.Start(t, zone)
	opts = append(opts, func(o *setupOpts) {
		prev := o.deps
		o.deps = func(d *api.Deps) {
			if prev != nil {
				prev(d)
			}
			d.Resolver = dnscheck.NewClient(srv.Addr(), 500*time.Millisecond)
		}
	})
	return &domainBundle{testBundle: setup(t, opts...), dns: srv}
}

type domainEvent struct {
	Type     string
	Severity string
	Domain   *string
	Tags     []string
	Payload  map[string]any
}

// domainEvents reads the account's events of one type, oldest first.
func domainEvents(t *testing.T, db dbutil.Executor, accountID, eventType string) []domainEvent {
	t.Helper()
	rows, err := db.Query(context.Background(),
		"SELECT event_type, severity, domain, tags, payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY created_at, id",
		accountID, eventType)
	require.NoError(t, err)
	defer rows.Close()
	var out []domainEvent
	for rows.Next() {
		var e domainEvent
		var payload []byte
		require.NoError(t, rows.Scan(&e.Type, &e.Severity, &e.Domain, &e.Tags, &payload))
		require.NoError(t, json.Unmarshal(payload, &e.Payload))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

// queuedJobs counts River jobs of a kind for a domain id.
func queuedJobs(t *testing.T, db dbutil.Executor, kind, domainID string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(),
		"SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'domain_id' = $2", kind, domainID).Scan(&n))
	return n
}

func createDomain(t *testing.T, b *testBundle, key, name string, tags ...string) api.Domain {
	t.Helper()
	body := map[string]any{"domain": name}
	if tags != nil {
		body["tags"] = tags
	}
	resp := b.do(t, "POST", "/api/accounts/me/domains", key, body)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var d api.Domain
	resp.JSON(t, &d)
	return d
}

func lookup(t *testing.T, b *testBundle, key, name string) api.DNSLookup {
	t.Helper()
	resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/dns", key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out api.DNSLookup
	resp.JSON(t, &out)
	return out
}

func TestDomainCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)

	t.Run("NormalisesAndQueuesTheFirstCheck", func(t *testing.T) {
		d := createDomain(t, b, acct.Key, "  Bücher.Example.COM. ", "prod", "prod", " eu ")
		require.Equal(t, "xn--bcher-kva.example.com", d.Domain)
		require.Equal(t, []string{"prod", "eu"}, d.Tags)
		require.Empty(t, d.DKIMSelectors)
		require.Nil(t, d.Score)
		require.Nil(t, d.CheckedAt)
		require.Empty(t, d.Checks)
		require.Equal(t, 1, queuedJobs(t, b.db, "domain_check", d.ID.String()), "the first check is queued with the domain")
	})

	t.Run("DuplicateIs409", func(t *testing.T) {
		createDomain(t, b, acct.Key, "dup.example.org")
		resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "DUP.example.org."})
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Contains(t, resp.Detail(t), "dup.example.org")
	})

	t.Run("SameNameInAnotherAccount", func(t *testing.T) {
		createDomain(t, b, acct.Key, "shared.example.net")
		other := b.createAccount(t)
		createDomain(t, b, other.Key, "shared.example.net")
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, tc := range []struct {
			body   string
			status int
			field  string
		}{
			{`{"domain": "com"}`, 422, "domain"},
			{`{"domain": "co.uk"}`, 422, "domain"},
			{`{"domain": "github.io"}`, 422, "domain"},
			{`{"domain": "not a domain"}`, 422, "domain"},
			{`{"domain": "192.0.2.1"}`, 422, "domain"},
			{`{"domain": "a..b.com"}`, 422, "domain"},
			{`{"domain": ""}`, 422, "domain"},
			{`{}`, 422, "domain"},
			{`{"domain": "` + strings.Repeat("a", 64) + `.com"}`, 422, "domain"},
			{`{"domain": "ok.example.com", "tags": [""]}`, 422, "tags[0]"},
			{`{"domain": "ok.example.com", "tags": ["  "]}`, 422, "tags[0]"},
			{`{"domain": "ok.example.com", "tags": ["a\u0000b"]}`, 422, "tags[0]"},
			{`{"domain": "ok.example.com", "tags": ["` + strings.Repeat("t", 65) + `"]}`, 422, "tags[0]"},
			{`{"domain": "ok.example.com", "tags": [` + strings.Repeat(`"t",`, 20) + `"t"]}`, 422, "tags"},
			{`{"domain": "ok.example.com", "extra": 1}`, 422, "extra"},
			{`{"domain": 5}`, 400, ""},
			{`{"domain": "ok.example.com", "tags": "prod"}`, 400, ""},
			{`{"domain":`, 400, ""},
		} {
			resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, tc.body)
			require.Equal(t, tc.status, resp.Status, "%s: %s", tc.body, resp.Body)
			detail := resp.Detail(t)
			if tc.field != "" {
				var e api.ErrorBody
				resp.JSON(t, &e)
				require.NotEmpty(t, e.Errors, tc.body)
				require.Equal(t, tc.field, e.Errors[0].Field, tc.body)
			}
			if tc.body == `{"domain": "co.uk"}` {
				require.Contains(t, detail, "public suffix")
			}
		}
	})

	t.Run("Unauthenticated", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/accounts/me/domains", "", map[string]any{"domain": "x.example.com"})
		require.Equal(t, http.StatusUnauthorized, resp.Status)
	})
}

func TestDomainListGetPatchDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	for _, n := range []string{"c.example.com", "a.example.com", "b.example.com"} {
		createDomain(t, b, acct.Key, n)
	}

	t.Run("ListSortedAndPaged", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me/domains", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var all []api.Domain
		resp.JSON(t, &all)
		names := []string{}
		for _, d := range all {
			names = append(names, d.Domain)
		}
		require.Equal(t, []string{"a.example.com", "b.example.com", "c.example.com"}, names)

		resp = b.do(t, "GET", "/api/accounts/me/domains?limit=1&after=a.example.com", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var page []api.Domain
		resp.JSON(t, &page)
		require.Len(t, page, 1)
		require.Equal(t, "b.example.com", page[0].Domain)

		for _, q := range []string{"limit=0", "limit=501"} {
			resp = b.do(t, "GET", "/api/accounts/me/domains?"+q, acct.Key, nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, q)
		}
		resp = b.do(t, "GET", "/api/accounts/me/domains?limit=x", acct.Key, nil)
		require.Equal(t, http.StatusBadRequest, resp.Status)
	})

	t.Run("GetAnySpelling", func(t *testing.T) {
		for _, p := range []string{"a.example.com", "A.EXAMPLE.COM", "a.example.com."} {
			resp := b.do(t, "GET", "/api/accounts/me/domains/"+p, acct.Key, nil)
			require.Equal(t, http.StatusOK, resp.Status, p)
			var d api.DomainDetail
			resp.JSON(t, &d)
			require.Equal(t, "a.example.com", d.Domain.Domain)
			require.Nil(t, d.Results)
			require.Nil(t, d.Health)
		}
		createDomain(t, b, acct.Key, "bücher.example.com")
		resp := b.do(t, "GET", "/api/accounts/me/domains/"+url.PathEscape("bücher.example.com"), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	})

	t.Run("GetUnknownOrInvalidIs404", func(t *testing.T) {
		for _, p := range []string{"zzz.example.com", "com", "not..valid"} {
			resp := b.do(t, "GET", "/api/accounts/me/domains/"+p, acct.Key, nil)
			require.Equal(t, http.StatusNotFound, resp.Status, p)
			require.Equal(t, "domain not found", resp.Detail(t))
		}
	})

	t.Run("Patch", func(t *testing.T) {
		resp := b.do(t, "PATCH", "/api/accounts/me/domains/b.example.com", acct.Key, map[string]any{"tags": []string{"x", "y"}})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var d api.Domain
		resp.JSON(t, &d)
		require.Equal(t, []string{"x", "y"}, d.Tags)
		require.Empty(t, d.DKIMSelectors)
		checks := queuedJobs(t, b.db, "domain_check", d.ID.String())

		resp = b.do(t, "PATCH", "/api/accounts/me/domains/b.example.com", acct.Key, map[string]any{"dkim_selectors": []string{"S1", "k1.mail", "s1"}})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		resp.JSON(t, &d)
		require.Equal(t, []string{"x", "y"}, d.Tags, "tags left out are unchanged")
		require.Equal(t, []string{"s1", "k1.mail"}, d.DKIMSelectors)
		require.Equal(t, checks+1, queuedJobs(t, b.db, "domain_check", d.ID.String()), "new selectors queue a check")

		resp = b.do(t, "PATCH", "/api/accounts/me/domains/b.example.com", acct.Key, map[string]any{"tags": []string{}})
		require.Equal(t, http.StatusOK, resp.Status)
		resp.JSON(t, &d)
		require.Empty(t, d.Tags)
		require.Equal(t, []string{"s1", "k1.mail"}, d.DKIMSelectors)
		require.Equal(t, checks+1, queuedJobs(t, b.db, "domain_check", d.ID.String()), "unchanged selectors queue nothing")

		for _, tc := range []struct {
			body  string
			field string
		}{
			{`{"dkim_selectors": ["bad selector"]}`, "dkim_selectors[0]"},
			{`{"dkim_selectors": ["ok", "-dash"]}`, "dkim_selectors[1]"},
			{`{"dkim_selectors": ["a..b"]}`, "dkim_selectors[0]"},
			{`{"dkim_selectors": ["under_score"]}`, "dkim_selectors[0]"},
			{`{"dkim_selectors": [""]}`, "dkim_selectors[0]"},
			{`{"dkim_selectors": ["` + strings.Repeat("a", 64) + `"]}`, "dkim_selectors[0]"},
			{`{"tags": [""]}`, "tags[0]"},
			{`{"name": "x"}`, "name"},
		} {
			resp := b.do(t, "PATCH", "/api/accounts/me/domains/b.example.com", acct.Key, tc.body)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", tc.body, resp.Body)
			var e api.ErrorBody
			resp.JSON(t, &e)
			require.Equal(t, tc.field, e.Errors[0].Field, tc.body)
		}
		resp = b.do(t, "PATCH", "/api/accounts/me/domains/b.example.com", acct.Key, `{"tags": "x"}`)
		require.Equal(t, http.StatusBadRequest, resp.Status)
		resp = b.do(t, "PATCH", "/api/accounts/me/domains/nope.example.com", acct.Key, map[string]any{"tags": []string{"x"}})
		require.Equal(t, http.StatusNotFound, resp.Status)
	})

	t.Run("Delete", func(t *testing.T) {
		createDomain(t, b, acct.Key, "gone.example.com")
		resp := b.do(t, "DELETE", "/api/accounts/me/domains/GONE.example.com", acct.Key, nil)
		require.Equal(t, http.StatusNoContent, resp.Status)
		resp = b.do(t, "DELETE", "/api/accounts/me/domains/gone.example.com", acct.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)
		resp = b.do(t, "GET", "/api/accounts/me/domains/gone.example.com", acct.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)
		// The name can be monitored again.
		createDomain(t, b, acct.Key, "gone.example.com")
	})
}

func TestDomainTenantIsolation(t *testing.T) {
	t.Parallel()
	const name = "isolated.test"
	b := domainSetup(t, testfactory.GoodZone(name))
	owner, other := b.createAccount(t), b.createAccount(t)
	createDomain(t, b.testBundle, owner.Key, name)

	base := "/api/accounts/me/domains/" + name
	for _, r := range []struct{ method, path, body string }{
		{"GET", base, ""},
		{"PATCH", base, `{"tags": ["x"]}`},
		{"DELETE", base, ""},
		{"GET", base + "/dns", ""},
		{"POST", base + "/health/recompute", ""},
		{"GET", base + "/health", ""},
	} {
		var body any
		if r.body != "" {
			body = r.body
		}
		resp := b.do(t, r.method, r.path, other.Key, body)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s %s", r.method, r.path)
		require.Equal(t, "domain not found", resp.Detail(t))
	}
	resp := b.do(t, "GET", "/api/accounts/me/domains", other.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, "[]", string(resp.Body))

	// Nothing the other account did touched the owner's domain.
	resp = b.do(t, "GET", base, owner.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var d api.DomainDetail
	resp.JSON(t, &d)
	require.Empty(t, d.Tags)
	require.Nil(t, d.CheckedAt)
	require.Zero(t, b.dns.QueriesFor(name+"."), "the other account's lookup asked no DNS")
}

func TestDomainLiveLookup(t *testing.T) {
	t.Parallel()

	t.Run("PassStoresTheSnapshotAndScores", func(t *testing.T) {
		t.Parallel()
		const name = "live-pass.test"
		b := domainSetup(t, testfactory.GoodZone(name))
		acct := b.createAccount(t)
		createDomain(t, b.testBundle, acct.Key, name)

		out := lookup(t, b.testBundle, acct.Key, name)
		require.True(t, out.Stored)
		require.Equal(t, name, out.Domain)
		require.Equal(t, dnscheck.StatusPass, out.Results.SPF.Status, "%v", out.Results.SPF.Errors)
		require.Equal(t, dnscheck.StatusPass, out.Results.DMARC.Status, "%v %v", out.Results.DMARC.Errors, out.Results.DMARC.Warnings)
		require.Equal(t, dnscheck.StatusPass, out.Results.DKIM.Status)
		require.Equal(t, dnscheck.StatusPass, out.Results.MX.Status)
		require.Equal(t, dnscheck.StatusPass, out.Results.TLSRPT.Status)
		require.Equal(t, dnscheck.StatusNone, out.Results.MTASTS.Status)
		require.Empty(t, out.Changes, "the first check is a baseline, not a change")
		// dmarc 25 + spf 20 + dkim 20 + mx 10 + tls_rpt 5; no dnssec, mta-sts, bimi.
		require.NotNil(t, out.Score)
		require.Equal(t, 80, *out.Score)

		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var d api.DomainDetail
		resp.JSON(t, &d)
		require.NotNil(t, d.Results)
		require.Equal(t, out.Results.SPF.Records, d.Results.SPF.Records)
		require.Equal(t, "pass", d.Checks["spf"])
		require.Equal(t, "none", d.Checks["mta_sts"])
		require.Len(t, d.Checks, 8)
		require.NotNil(t, d.Health)
		require.Equal(t, 80, d.Health.Score)
		require.Equal(t, 80, *d.Score)
		require.WithinDuration(t, out.CheckedAt, *d.CheckedAt, time.Millisecond)

		resp = b.do(t, "GET", "/api/accounts/me/domains", acct.Key, nil)
		var list []api.Domain
		resp.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, 80, *list[0].Score)
		require.Equal(t, "pass", list[0].Checks["dkim"])

		// A second lookup with nothing changed emits nothing, and the
		// unchanged score emits nothing either but is still recorded.
		out = lookup(t, b.testBundle, acct.Key, name)
		require.Empty(t, out.Changes)
		require.Empty(t, domainEvents(t, b.db, acct.ID, "dns_record_changed"))
		require.Empty(t, domainEvents(t, b.db, acct.ID, "health_score_changed"))
		var hist []api.HealthEntry
		resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		resp.JSON(t, &hist)
		require.Len(t, hist, 2)
	})

	t.Run("ServFailIsTemperrorNeverAChange", func(t *testing.T) {
		t.Parallel()
		const name = "live-servfail.test"
		b := domainSetup(t, testfactory.GoodZone(name))
		acct := b.createAccount(t)
		createDomain(t, b.testBundle, acct.Key, name, "prod")
		first := lookup(t, b.testBundle, acct.Key, name)
		require.Equal(t, 80, *first.Score)

		b.dns.ServFail(name + ".")
		out := lookup(t, b.testBundle, acct.Key, name)
		require.True(t, out.Stored)
		require.Equal(t, dnscheck.StatusTemperror, out.Results.SPF.Status)
		require.Equal(t, dnscheck.StatusTemperror, out.Results.MX.Status)
		require.Empty(t, out.Changes)
		require.Equal(t, 80, *out.Score, "an unknown answer counts with its last known result")
		require.Empty(t, domainEvents(t, b.db, acct.ID, "dns_record_changed"))
		require.Empty(t, domainEvents(t, b.db, acct.ID, "health_score_changed"))

		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil)
		var d api.DomainDetail
		resp.JSON(t, &d)
		require.Equal(t, "temperror", d.Checks["spf"], "the latest snapshot shows the failure")
		require.Contains(t, d.Health.Components[1].Reason, "last known answer")
	})

	t.Run("SelectorsSeenInReportsAreChecked", func(t *testing.T) {
		t.Parallel()
		const name = "live-seen.test"
		b := domainSetup(t, testfactory.GoodZone(name))
		acct := b.createAccount(t)
		d := createDomain(t, b.testBundle, acct.Key, name)
		// A DMARC report of today saw the selector "reportsel" pass for the domain.
		_, err := b.db.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
			compliant, forwarded, failing, dkim_selectors) VALUES ($1, current_date, '192.0.2.1', 10, 10, 10, 10, 0, 0, '{reportsel}')`, d.ID)
		require.NoError(t, err)

		out := lookup(t, b.testBundle, acct.Key, name)
		require.NotNil(t, out.Results.DKIM)
		var sources []string
		for _, sel := range out.Results.DKIM.Selectors {
			if sel.Selector == "reportsel" {
				sources = append(sources, sel.Source)
			}
		}
		require.Equal(t, []string{"configured"}, sources, "the live lookup checks the selectors seen in reports, like the periodic check")
		require.NotZero(t, b.dns.QueriesFor("reportsel._domainkey."+name+"."))
	})

	t.Run("DropIsTemperror", func(t *testing.T) {
		t.Parallel()
		const name = "live-drop.test"
		b := domainSetup(t, testfactory.GoodZone(name))
		acct := b.createAccount(t)
		createDomain(t, b.testBundle, acct.Key, name)
		b.dns.Drop("_dmarc." + name + ".")
		out := lookup(t, b.testBundle, acct.Key, name)
		require.Equal(t, dnscheck.StatusTemperror, out.Results.DMARC.Status)
		require.Equal(t, dnscheck.StatusPass, out.Results.SPF.Status)
		// The first score leaves DMARC out and rescales: 55 of 75 points.
		require.Equal(t, 73, *out.Score)
		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil)
		var d api.DomainDetail
		resp.JSON(t, &d)
		require.Equal(t, []string{"dmarc"}, d.Health.Unknown)
	})

	t.Run("ChangeEmitsEvents", func(t *testing.T) {
		t.Parallel()
		const name = "live-change.test"
		b := domainSetup(t, testfactory.GoodZone(name))
		acct := b.createAccount(t)
		createDomain(t, b.testBundle, acct.Key, name, "prod", "eu")
		lookup(t, b.testBundle, acct.Key, name)

		b.dns.Remove(name+".", dns.TypeTXT) // the SPF record
		out := lookup(t, b.testBundle, acct.Key, name)
		require.Len(t, out.Changes, 1)
		require.Equal(t, "spf", out.Changes[0].Check)
		require.True(t, out.Changes[0].Critical)
		require.Equal(t, "pass", out.Changes[0].Before.Status)
		require.Equal(t, "none", out.Changes[0].After.Status)
		require.Equal(t, 60, *out.Score)

		evs := domainEvents(t, b.db, acct.ID, "dns_record_changed")
		require.Len(t, evs, 1)
		require.Equal(t, "critical", evs[0].Severity)
		require.Equal(t, name, *evs[0].Domain)
		require.Equal(t, []string{"prod", "eu"}, evs[0].Tags)
		require.Equal(t, "spf", evs[0].Payload["check"])
		require.Equal(t, map[string]any{"status": "pass", "records": []any{"v=spf1 mx ip4:192.0.2.0/24 -all"}}, evs[0].Payload["before"])
		require.Equal(t, map[string]any{"status": "none", "records": []any{}}, evs[0].Payload["after"])

		hs := domainEvents(t, b.db, acct.ID, "health_score_changed")
		require.Len(t, hs, 1)
		require.Equal(t, "critical", hs[0].Severity, "a fall of 20 points is critical")
		require.EqualValues(t, 80, hs[0].Payload["previous_score"])
		require.EqualValues(t, 60, hs[0].Payload["score"])
		require.EqualValues(t, -20, hs[0].Payload["delta"])
		require.Len(t, hs[0].Payload["reasons"], 1)
		require.Contains(t, hs[0].Payload["reasons"].([]any)[0], "spf:")

		// Publishing a different SPF record is a non-critical change that
		// brings the score back up (an info event: rises are good news).
		require.NoError(t, b.dns.Set(name+`. TXT "v=spf1 ip4:198.51.100.0/24 -all"`))
		out = lookup(t, b.testBundle, acct.Key, name)
		require.Len(t, out.Changes, 1)
		require.False(t, out.Changes[0].Critical)
		evs = domainEvents(t, b.db, acct.ID, "dns_record_changed")
		require.Len(t, evs, 2)
		require.Equal(t, "warning", evs[1].Severity)
		hs = domainEvents(t, b.db, acct.ID, "health_score_changed")
		require.Len(t, hs, 2)
		require.Equal(t, "info", hs[1].Severity)
		require.EqualValues(t, 20, hs[1].Payload["delta"])

		// Removing TLS-RPT loses 5 points: exactly the threshold, reported
		// but not critical.
		b.dns.Remove("_smtp._tls."+name+".", dns.TypeTXT)
		out = lookup(t, b.testBundle, acct.Key, name)
		require.Equal(t, 75, *out.Score)
		hs = domainEvents(t, b.db, acct.ID, "health_score_changed")
		require.Len(t, hs, 3, "a change of 5 points is reported")
		require.Equal(t, "warning", hs[2].Severity)
	})

	t.Run("NewSelectorsAreABaselineNotAChange", func(t *testing.T) {
		t.Parallel()
		const name = "live-selectors.test"
		b := domainSetup(t, testfactory.GoodZone(name)+
			`mw2024._domainkey.`+name+`. TXT "v=DKIM1; k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs="`+"\n")
		acct := b.createAccount(t)
		createDomain(t, b.testBundle, acct.Key, name)
		before := lookup(t, b.testBundle, acct.Key, name)

		resp := b.do(t, "PATCH", "/api/accounts/me/domains/"+name, acct.Key, map[string]any{"dkim_selectors": []string{"mw2024"}})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		after := lookup(t, b.testBundle, acct.Key, name)
		require.NotEqual(t, before.Results.DKIM.Records, after.Results.DKIM.Records, "the configured selector's key is found")
		require.Empty(t, after.Changes)
		require.Empty(t, domainEvents(t, b.db, acct.ID, "dns_record_changed"))

		// The key behind the configured selector is then watched like any record.
		b.dns.Remove("mw2024._domainkey."+name+".", dns.TypeTXT)
		after = lookup(t, b.testBundle, acct.Key, name)
		require.Len(t, after.Changes, 1)
		require.Equal(t, "dkim", after.Changes[0].Check)
	})

	t.Run("UnknownIs404AndUnconfiguredIs503", func(t *testing.T) {
		t.Parallel()
		b := domainSetup(t, testfactory.GoodZone("live-404.test"))
		acct := b.createAccount(t)
		resp := b.do(t, "GET", "/api/accounts/me/domains/live-404.test/dns", acct.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)

		nb := setup(t)
		acct = nb.createAccount(t)
		createDomain(t, nb, acct.Key, "noresolver.test")
		resp = nb.do(t, "GET", "/api/accounts/me/domains/noresolver.test/dns", acct.Key, nil)
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.Contains(t, resp.Detail(t), "not configured")
	})
}

func TestDomainHealthRoutes(t *testing.T) {
	t.Parallel()
	const name = "health-routes.test"
	b := domainSetup(t, testfactory.GoodZone(name))
	acct := b.createAccount(t)
	d := createDomain(t, b.testBundle, acct.Key, name)

	resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, "[]", string(resp.Body))

	resp = b.do(t, "POST", "/api/accounts/me/domains/"+name+"/health/recompute", acct.Key, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var rc api.HealthRecompute
	resp.JSON(t, &rc)
	require.Equal(t, name, rc.Domain)
	require.NotZero(t, rc.JobID)
	require.Equal(t, 1, queuedJobs(t, b.db, "domain_health", d.ID.String()))

	lookup(t, b.testBundle, acct.Key, name)
	b.dns.Authenticate(name + ".")
	lookup(t, b.testBundle, acct.Key, name)
	resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var hist []api.HealthEntry
	resp.JSON(t, &hist)
	require.Len(t, hist, 2)
	require.Equal(t, 90, hist[0].Score, "newest first: DNSSEC now validates")
	require.Equal(t, 80, hist[1].Score)
	require.Len(t, hist[0].Components, 8)
	require.False(t, hist[0].ComputedAt.Before(hist[1].ComputedAt))

	resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health?limit=1", acct.Key, nil)
	resp.JSON(t, &hist)
	require.Len(t, hist, 1)
	for _, q := range []string{"limit=0", "limit=201"} {
		resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/health?"+q, acct.Key, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	}
	resp = b.do(t, "POST", "/api/accounts/me/domains/nope.test/health/recompute", acct.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status)
	resp = b.do(t, "GET", "/api/accounts/me/domains/nope.test/health", acct.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status)
}

func TestDomainDashboard(t *testing.T) {
	t.Parallel()
	zone := testfactory.GoodZone("dash-good.test") + `
dash-bad.test. SOA ns.dash-bad.test. hostmaster.dash-bad.test. 1 7200 3600 1209600 300
dash-bad.test. TXT "v=spf1 +all"
`
	b := domainSetup(t, zone)
	acct := b.createAccount(t)

	summary := func() api.DashboardDomains {
		resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var s api.DashboardSummary
		resp.JSON(t, &s)
		return s.Domains
	}
	s := summary()
	require.Zero(t, s.Total)
	require.Nil(t, s.AverageScore)

	createDomain(t, b.testBundle, acct.Key, "dash-good.test")
	createDomain(t, b.testBundle, acct.Key, "dash-bad.test")
	createDomain(t, b.testBundle, acct.Key, "dash-unchecked.test")
	good := lookup(t, b.testBundle, acct.Key, "dash-good.test")
	bad := lookup(t, b.testBundle, acct.Key, "dash-bad.test")
	require.Less(t, *bad.Score, 50)

	s = summary()
	require.EqualValues(t, 3, s.Total)
	require.NotNil(t, s.AverageScore)
	require.InDelta(t, float64(*good.Score+*bad.Score)/2, *s.AverageScore, 0.001)
	require.EqualValues(t, 1, s.AtRisk)
}

// TestDomainThatDoesNotExist: a domain whose name answers NXDOMAIN says so
// plainly in every check and scores 0, not the 10 of an existing domain
// that publishes nothing.
func TestDomainThatDoesNotExist(t *testing.T) {
	t.Parallel()
	b := domainSetup(t, testfactory.GoodZone("exists.test"))
	acct := b.createAccount(t)
	const name = "missing.test"
	createDomain(t, b.testBundle, acct.Key, name)

	out := lookup(t, b.testBundle, acct.Key, name)
	require.True(t, out.Results.NXDomain)
	require.Equal(t, dnscheck.StatusNone, out.Results.SPF.Status)
	require.Equal(t, []string{"the domain missing.test does not exist in DNS (the resolver answered NXDOMAIN), so it has no records at all"}, out.Results.SPF.Errors)
	require.NotNil(t, out.Score)
	require.Equal(t, 0, *out.Score)

	resp := b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var d api.DomainDetail
	resp.JSON(t, &d)
	require.True(t, d.Health.NXDomain)
	require.Equal(t, "none", d.Checks["dkim"], "not neutral: there is no selector to look at")
	for _, c := range d.Health.Components {
		require.Equal(t, "the domain does not exist in DNS (NXDOMAIN)", c.Reason)
	}
}
