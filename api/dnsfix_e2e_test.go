package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/bindtest"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// brokenSPFZone is a zone whose SPF record needs 11 lookups (permerror):
// every include's record is in the zone, so the loopback BIND answers for
// them as the resolver.
func brokenSPFZone(name string) (string, string) {
	var b strings.Builder
	var incs []string
	for i := range 11 {
		fmt.Fprintf(&b, "_s%d.%s. IN TXT \"v=spf1 ip4:192.0.2.%d -all\"\n", i, name, i+1)
		incs = append(incs, fmt.Sprintf("include:_s%d.%s", i, name))
	}
	spfRec := "v=spf1 " + strings.Join(incs, " ") + " -all"
	fmt.Fprintf(&b, "%[1]s. IN TXT %[2]s\n%[1]s. IN TXT \"google-site-verification=keepme\"\n", name, dnsprovider.QuoteTXT(spfRec))
	fmt.Fprintf(&b, "%[1]s. IN MX 10 mx.%[1]s.\nmx.%[1]s. IN A 192.0.2.50\n", name)
	fmt.Fprintf(&b, "_dmarc.%[1]s. IN TXT \"v=DMARC1; p=reject; rua=mailto:dmarc@%[1]s\"\n", name)
	fmt.Fprintf(&b, "_smtp._tls.%[1]s. IN TXT \"v=TLSRPTv1; rua=mailto:tls@%[1]s\"\n", name)
	return b.String(), spfRec
}

type recommendation struct {
	ID          string   `json:"id"`
	Check       string   `json:"check"`
	Name        string   `json:"name"`
	Current     []string `json:"current"`
	Proposed    []string `json:"proposed"`
	Op          string   `json:"op"`
	Fingerprint string   `json:"fingerprint"`
	State       string   `json:"state"`
	LastError   *string  `json:"last_error"`
}

func listRecs(t *testing.T, b *testBundle, key, domain string) map[string]recommendation {
	resp := b.do(t, "GET", "/api/accounts/me/domains/"+domain+"/dns-recommendations", key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var recs []recommendation
	resp.JSON(t, &recs)
	out := map[string]recommendation{}
	for _, r := range recs {
		out[r.Check] = r
	}
	return out
}

// TestDNSFixEndToEnd is the DNS fixes acceptance test: a domain whose SPF
// record on a real BIND is over the lookup limit gets a flattening
// recommendation; applying it through an RFC 2136 connection fixes the
// record in DNS (the other apex TXT record stays), the re-check passes, the
// score rises and dns_fix_applied and health_score_changed reach a
// subscription. A concurrent edit makes another apply fail with a conflict.
func TestDNSFixEndToEnd(t *testing.T) {
	t.Parallel()
	const name = "fix-e2e.test"
	ctx := context.Background()
	zone, brokenSPF := brokenSPFZone(name)
	bind := bindtest.Start(t, name, zone)
	pool, _ := dbtest.NewDB(t)
	resolver := dnscheck.NewClient(bind.Addr, 2*time.Second)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32)) // the harness's key
	require.NoError(t, err)
	fix := &domains.FixDeps{
		Env: &dnsfix.Env{Keyring: keyring, Guard: testGuard(t)},
		MX:  dnsfix.MXConfig{Host: "mx.mailwatch.test"},
		Inputs: func(context.Context, dbsqlc.DBTX, dbsqlc.Domain, *dnscheck.Results, time.Time) dnsfix.Inputs {
			return dnsfix.Inputs{ReportAddress: "dmarc+tok@inbound.mailwatch.test"}
		},
	}
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.Resolver, d.DNSFix = resolver, fix }
	})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: logger, Keyring: keyring, Resolver: resolver, DNSFix: fix,
		Settings:      jobs.Settings{DNSCheckInterval: time.Hour, EventRetentionDays: 90, HealthHistoryDays: 90},
		WebhookClient: webhook.NewClient(testGuard(t), webhook.ClientOptions{}),
	}, jobs.Options{Concurrency: 10})
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(stopCtx)
	})

	acct := b.createAccount(t)
	receiver := newPushReceiver(t)
	resp := b.do(t, "POST", "/api/accounts/me/event-subscriptions", acct.Key, map[string]any{
		"url":         receiver.URL + "/hooks",
		"event_types": []string{"dns_fix_applied", "dns_fix_failed", "health_score_changed"},
	})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)

	createDomain(t, b, acct.Key, name)
	var first api.DomainDetail
	eventually(t, 30*time.Second, "the first check to be scored", func() bool {
		b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil).JSON(t, &first)
		return first.Score != nil
	})
	require.Equal(t, "permerror", first.Checks["spf"])

	var spfRec recommendation
	eventually(t, 30*time.Second, "the SPF recommendation", func() bool {
		spfRec = listRecs(t, b, acct.Key, name)["spf"]
		return spfRec.ID != ""
	})
	require.Equal(t, []string{brokenSPF}, spfRec.Current)
	require.Equal(t, "replace_rr", spfRec.Op)
	require.Len(t, spfRec.Proposed, 1)
	require.True(t, strings.HasPrefix(spfRec.Proposed[0], "v=spf1 ip4:192.0.2.1 ip4:192.0.2.2 "), spfRec.Proposed[0])
	require.NotContains(t, spfRec.Proposed[0], "include:")

	apply := "/api/accounts/me/domains/" + name + "/dns-recommendations/" + spfRec.ID + "/apply"

	// Without a connection: 422 with the record to publish by hand.
	resp = b.do(t, "POST", apply, acct.Key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "publish by hand: fix-e2e.test. TXT \"v=spf1 ip4:192.0.2.1")
	var byHand api.RecordErrorBody
	resp.JSON(t, &byHand)
	require.NotNil(t, byHand.Record, "the record to publish, not only in detail")
	require.Equal(t, name, byHand.Record.Name)
	require.Equal(t, "TXT", byHand.Record.Type)
	require.Equal(t, spfRec.Proposed, byHand.Record.Proposed)
	require.Equal(t, spfRec.Current, byHand.Record.Current)

	// A TSIG key the server refuses is a clear 422 at creation.
	conn := map[string]any{"kind": "rfc2136", "label": "bind", "config": map[string]any{
		"server": bind.Addr, "tsig_key_name": bindtest.KeyName, "tsig_algorithm": "hmac-sha256", "tsig_secret": "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZw==",
	}}
	resp = b.do(t, "POST", "/api/accounts/me/dns-providers", acct.Key, conn)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "TSIG key")
	require.Contains(t, resp.Detail(t), "BADSIG")

	conn["config"].(map[string]any)["tsig_secret"] = bind.Secret
	resp = b.do(t, "POST", "/api/accounts/me/dns-providers", acct.Key, conn)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	require.NotContains(t, string(resp.Body), bind.Secret, "the secret is never shown")
	var provider api.DNSProvider
	resp.JSON(t, &provider)
	resp = b.do(t, "POST", "/api/accounts/me/dns-providers/"+provider.ID.String()+"/links", acct.Key, map[string]any{"domain": name})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var link api.DNSProviderLink
	resp.JSON(t, &link)
	require.Equal(t, name, link.Zone)

	// Another account cannot see or use it.
	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/accounts/me/dns-providers/"+provider.ID.String(), other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", apply, other.Key, nil).Status)

	// A stale fingerprint is 409 with the record now observed.
	resp = b.do(t, "POST", apply, acct.Key, map[string]any{"fingerprint": "0000"})
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "include:_s0.fix-e2e.test")
	var conflict api.RecordErrorBody
	resp.JSON(t, &conflict)
	require.NotNil(t, conflict.Record, "the record now held, not only in detail")
	require.Equal(t, spfRec.Current, conflict.Record.Current)
	require.Equal(t, spfRec.Proposed, conflict.Record.Proposed)

	// Dry run: the exact update, nothing written.
	resp = b.do(t, "POST", apply+"?dry_run=true", acct.Key, map[string]any{"fingerprint": spfRec.Fingerprint})
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var dry struct {
		DryRun bool `json:"dry_run"`
		Plan   struct {
			Change struct {
				Current []string `json:"current"`
			} `json:"change"`
			Request struct {
				Message string `json:"message"`
			} `json:"request"`
		} `json:"plan"`
	}
	resp.JSON(t, &dry)
	require.True(t, dry.DryRun)
	require.ElementsMatch(t, []string{brokenSPF, "google-site-verification=keepme"}, dry.Plan.Change.Current)
	require.Contains(t, dry.Plan.Request.Message, "PREREQUISITE SECTION")
	txt, err := bind.Query(ctx, name, dns.TypeTXT)
	require.NoError(t, err)
	require.Contains(t, txt, brokenSPF, "a dry run writes nothing")

	// Apply: 202, the job writes the record and re-checks.
	resp = b.do(t, "POST", apply, acct.Key, map[string]any{"fingerprint": spfRec.Fingerprint})
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var applied struct {
		Recommendation recommendation `json:"recommendation"`
		JobState       *string        `json:"job_state"`
	}
	resp.JSON(t, &applied)
	require.Equal(t, "applying", applied.Recommendation.State)
	require.NotNil(t, applied.JobState)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", apply, acct.Key, nil).Status, "already applying")

	eventually(t, 60*time.Second, "dns_fix_applied and a rising score at the subscription", func() bool {
		return len(receiver.byType("dns_fix_applied")) > 0 && len(receiver.byType("health_score_changed")) > 0
	})
	txt, err = bind.Query(ctx, name, dns.TypeTXT)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{spfRec.Proposed[0], "google-site-verification=keepme"}, txt)

	ev := receiver.byType("dns_fix_applied")[0].Event.Data
	require.Equal(t, name, *ev.Domain)
	require.Equal(t, []any{brokenSPF}, ev.Payload["before"])
	require.Equal(t, []any{spfRec.Proposed[0]}, ev.Payload["after"])
	require.Equal(t, "rfc2136", ev.Payload["connection_kind"])

	var after api.DomainDetail
	eventually(t, 30*time.Second, "the re-check to pass", func() bool {
		b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil).JSON(t, &after)
		return after.Checks["spf"] == "pass"
	})
	require.Greater(t, *after.Score, *first.Score)
	hs := receiver.byType("health_score_changed")[0].Event.Data
	require.Positive(t, hs.Payload["delta"])
	// The check job recomputes the domain's recommendations after it has
	// committed the check: wait for that state, not only for the check's.
	eventually(t, 30*time.Second, "the fixed recommendation to be gone", func() bool {
		_, stillThere := listRecs(t, b, acct.Key, name)["spf"]
		return !stillThere
	})

	// A concurrent edit: the DMARC record changes at the zone after the
	// recommendation (add mailwatch's rua) saw it; the apply's
	// compare-and-swap refuses and records a conflict.
	dmarcRec := listRecs(t, b, acct.Key, name)["dmarc"]
	require.NotEmpty(t, dmarcRec.ID)
	require.Equal(t, []string{"v=DMARC1; p=reject; rua=mailto:dmarc@fix-e2e.test,mailto:dmarc+tok@inbound.mailwatch.test"}, dmarcRec.Proposed)
	require.NoError(t, bind.Update(ctx, func(m *dns.Msg) {
		old, _ := dns.NewRR(`_dmarc.fix-e2e.test. 0 IN TXT "v=DMARC1; p=reject; rua=mailto:dmarc@fix-e2e.test"`)
		m.Remove([]dns.RR{old})
		rr, _ := dns.NewRR(`_dmarc.fix-e2e.test. 300 IN TXT "v=DMARC1; p=quarantine; rua=mailto:dmarc@fix-e2e.test"`)
		m.Insert([]dns.RR{rr})
	}))
	resp = b.do(t, "POST", "/api/accounts/me/domains/"+name+"/dns-recommendations/"+dmarcRec.ID+"/apply", acct.Key, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	eventually(t, 60*time.Second, "dns_fix_failed at the subscription", func() bool {
		return len(receiver.byType("dns_fix_failed")) > 0
	})
	failed := receiver.byType("dns_fix_failed")[0].Event.Data
	require.Equal(t, true, failed.Payload["conflict"])
	require.Equal(t, []any{"v=DMARC1; p=quarantine; rua=mailto:dmarc@fix-e2e.test"}, failed.Payload["after"])
	got := listRecs(t, b, acct.Key, name)["dmarc"]
	require.Equal(t, "failed", got.State)
	require.Contains(t, *got.LastError, "p=quarantine")
	txt, err = bind.Query(ctx, "_dmarc."+name, dns.TypeTXT)
	require.NoError(t, err)
	require.Equal(t, []string{"v=DMARC1; p=quarantine; rua=mailto:dmarc@fix-e2e.test"}, txt, "the concurrent edit is kept")
	require.True(t, slices.Contains(txt, "v=DMARC1; p=quarantine; rua=mailto:dmarc@fix-e2e.test"))
}
