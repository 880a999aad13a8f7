package dnsfix_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

func TestMergeDMARC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, addr, policy, want string }{
		{"v=DMARC1; p=none; pct=50; rua=mailto:a@example.com", "r@mw.test", "", "v=DMARC1; p=none; rua=mailto:a@example.com,mailto:r@mw.test"},
		{"v=DMARC1; p=none", "r@mw.test", "quarantine", "v=DMARC1; p=quarantine; rua=mailto:r@mw.test"},
		{"v=DMARC1;p=reject;rua=mailto:R@MW.TEST!10m", "r@mw.test", "", "v=DMARC1; p=reject; rua=mailto:R@MW.TEST!10m"},
		{"v=DMARC1; p=none; rua=mailto:a@example.com", "", "", "v=DMARC1; p=none; rua=mailto:a@example.com"},
	} {
		got, err := dnsfix.MergeDMARC(tc.in, tc.addr, tc.policy)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	_, err := dnsfix.MergeDMARC("v=spf1 -all", "r@mw.test", "")
	require.Error(t, err)
}

func spfResult(status string, lookups int, def string, recs ...string) *dnscheck.SPFResult {
	return &dnscheck.SPFResult{Result: dnscheck.Result{Status: status, Records: recs}, Lookups: lookups, Default: def}
}

func TestCompute(t *testing.T) {
	t.Parallel()
	mail := &dnscheck.MXResult{Result: dnscheck.Result{Status: dnscheck.StatusPass}, Hosts: []dnscheck.MXHost{{Host: "mx.example.com"}}}

	t.Run("SPFFlattenedOnlyForTheRecordItWasComputedFrom", func(t *testing.T) {
		k := &dnscheck.Results{SPF: spfResult("permerror", 12, "fail", "v=spf1 include:a -all"), MX: mail}
		recs := dnsfix.Compute("example.com", k, dnsfix.Inputs{FlatSPF: "v=spf1 ip4:192.0.2.1 -all", FlatSPFFrom: "v=spf1 include:a -all"})
		require.Equal(t, "spf", recs[0].Key)
		require.Equal(t, []string{"v=spf1 ip4:192.0.2.1 -all"}, recs[0].Proposed)
		require.Equal(t, "replace_rr", recs[0].Op())
		require.Equal(t, "critical", recs[0].Severity)
		require.True(t, recs[0].Selects("v=spf1 -all"))
		require.False(t, recs[0].Selects("google-site-verification=x"))

		stale := dnsfix.Compute("example.com", k, dnsfix.Inputs{FlatSPF: "v=spf1 ip4:192.0.2.1 -all", FlatSPFFrom: "v=spf1 include:old -all"})
		for _, r := range stale {
			require.NotEqual(t, "spf", r.Key)
		}
	})

	t.Run("MTASTSSafeToEnforce", func(t *testing.T) {
		sts := func(mode string) *dnscheck.MTASTSResult {
			return &dnscheck.MTASTSResult{Result: dnscheck.Result{Status: "warn", Records: []string{"v=STSv1; id=1", "policy: mode: " + mode}},
				Policy: &dnscheck.STSPolicy{Mode: mode, MaxAge: 604800, MX: []string{"mx.example.com"}}}
		}
		k := &dnscheck.Results{MX: mail, MTASTS: sts("testing")}
		recs := dnsfix.Compute("example.com", k, dnsfix.Inputs{MTASTSSafeToEnforce: true})
		require.Len(t, recs, 1)
		require.Equal(t, "mta_sts_enforce", recs[0].Key)
		require.Equal(t, []string{"v=STSv1; id=1"}, recs[0].Current)
		require.True(t, recs[0].Manual)
		require.Contains(t, recs[0].Why, "Safe to enforce")
		require.True(t, recs[0].Selects("v=STSv1; id=2"))
		require.False(t, recs[0].Selects("google-site-verification=x"))
		require.Empty(t, dnsfix.Compute("example.com", k, dnsfix.Inputs{}), "not without the probes' say-so")
		k.MTASTS = sts("enforce")
		require.Empty(t, dnsfix.Compute("example.com", k, dnsfix.Inputs{MTASTSSafeToEnforce: true}), "already enforced")
	})

	t.Run("PlusAll", func(t *testing.T) {
		k := &dnscheck.Results{SPF: spfResult("pass", 1, "pass", "v=spf1 mx +all"), MX: mail}
		recs := dnsfix.Compute("example.com", k, dnsfix.Inputs{})
		require.Equal(t, []string{"v=spf1 mx ~all"}, recs[0].Proposed)
	})

	t.Run("DMARCCreatedAndMerged", func(t *testing.T) {
		k := &dnscheck.Results{DMARC: &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "none"}}, MX: mail}
		recs := dnsfix.Compute("example.com", k, dnsfix.Inputs{ReportAddress: "dmarc+abc@mw.test"})
		require.Len(t, recs, 1)
		require.Equal(t, "_dmarc.example.com", recs[0].Name)
		require.Equal(t, []string{"v=DMARC1; p=none; rua=mailto:dmarc+abc@mw.test"}, recs[0].Proposed)
		require.Equal(t, "create", recs[0].Op())

		rec := "v=DMARC1; p=none; pct=20; rua=mailto:ops@example.com"
		parsed, err := dmarc.ParseRecord(rec)
		require.NoError(t, err)
		k.DMARC = &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "warn", Records: []string{rec}}, Parsed: parsed, Policy: "none"}
		ready := &dnsfix.Readiness{Ready: true, NextPolicy: "quarantine", Reason: "99% of 12,000 messages from known senders pass"}
		recs = dnsfix.Compute("example.com", k, dnsfix.Inputs{ReportAddress: "dmarc+abc@mw.test", Readiness: ready})
		require.Equal(t, []string{"v=DMARC1; p=quarantine; rua=mailto:ops@example.com,mailto:dmarc+abc@mw.test"}, recs[0].Proposed)
		require.Contains(t, recs[0].Why, "pct")
		require.Contains(t, recs[0].Why, "quarantine")

		// Inherited from the organizational domain: not this zone's record.
		k.DMARC.Inherited = true
		require.Empty(t, dnsfix.Compute("mail.example.com", k, dnsfix.Inputs{ReportAddress: "x@mw.test"}))
	})

	t.Run("NonMailDomain", func(t *testing.T) {
		k := &dnscheck.Results{
			SPF:  spfResult("none", 0, ""),
			MX:   &dnscheck.MXResult{Result: dnscheck.Result{Status: "none"}},
			DKIM: &dnscheck.DKIMResult{Result: dnscheck.Result{Status: "neutral"}},
		}
		recs := dnsfix.Compute("parked.example", k, dnsfix.Inputs{})
		keys := map[string]dnsfix.Rec{}
		for _, r := range recs {
			keys[r.Key] = r
		}
		require.Equal(t, []string{"0 ."}, keys["mx_null"].Proposed)
		require.Equal(t, "MX", keys["mx_null"].Type)
		require.Equal(t, []string{"v=spf1 -all"}, keys["spf"].Proposed)
	})

	t.Run("TLSRPTMTASTSAndDKIMInstructions", func(t *testing.T) {
		k := &dnscheck.Results{
			MX:     mail,
			TLSRPT: &dnscheck.TLSRPTResult{Result: dnscheck.Result{Status: "none"}},
			MTASTS: &dnscheck.MTASTSResult{Result: dnscheck.Result{Status: "none"}},
			DKIM: &dnscheck.DKIMResult{Result: dnscheck.Result{Status: "warn"}, Selectors: []dnscheck.DKIMSelector{
				{Selector: "s1", Name: "s1._domainkey.example.com", Key: &dnscheck.DKIMKey{KeyType: "rsa", Bits: 1024}, Record: "v=DKIM1; p=MIGf"},
				{Selector: "s2", Name: "s2._domainkey.example.com", Key: &dnscheck.DKIMKey{KeyType: "rsa", Bits: 2048}, Record: "v=DKIM1; p=MIIB"},
			}},
		}
		recs := dnsfix.Compute("example.com", k, dnsfix.Inputs{})
		require.Len(t, recs, 3)
		require.Equal(t, "dkim:s1", recs[0].Key)
		require.True(t, recs[0].Manual)
		require.Equal(t, "mta_sts", recs[1].Key)
		require.True(t, recs[1].Manual)
		require.Equal(t, "tls_rpt", recs[2].Key)
		require.Equal(t, []string{"v=TLSRPTv1; rua=mailto:postmaster@example.com"}, recs[2].Proposed)
		_, err := dnscheck.ParseTLSRPT(recs[2].Proposed[0])
		require.NoError(t, err)
	})

	t.Run("TemperrorRecommendsNothing", func(t *testing.T) {
		k := &dnscheck.Results{SPF: spfResult("temperror", 0, ""), DMARC: &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "temperror"}}}
		require.Empty(t, dnsfix.Compute("example.com", k, dnsfix.Inputs{ReportAddress: "x@mw.test"}))
	})
}

func TestFingerprintIgnoresOrder(t *testing.T) {
	t.Parallel()
	require.Equal(t, dnsfix.Fingerprint("a.example", "TXT", []string{"x", "y"}), dnsfix.Fingerprint("A.example", "txt", []string{"y", "x"}))
	require.NotEqual(t, dnsfix.Fingerprint("a.example", "TXT", []string{"x"}), dnsfix.Fingerprint("a.example", "TXT", []string{"x", "y"}))
}

func TestFlatten(t *testing.T) {
	t.Parallel()
	var zone strings.Builder
	var includes []string
	for i := range 11 {
		fmt.Fprintf(&zone, "_s%d.flat.test. TXT \"v=spf1 ip4:192.0.2.%d ip6:2001:db8::%d -all\"\n", i, i, i)
		includes = append(includes, fmt.Sprintf("include:_s%d.flat.test", i))
	}
	zone.WriteString("nested.flat.test. TXT \"v=spf1 include:_s1.flat.test a:host.flat.test ~all\"\n")
	zone.WriteString("host.flat.test. A 198.51.100.7\n")
	zone.WriteString("excl.flat.test. TXT \"v=spf1 -ip4:192.0.2.99 ip4:192.0.2.0/24 -all\"\n")
	srv := dnstest.Start(t, zone.String())
	r := dnscheck.NewClient(srv.Addr(), time.Second)
	ctx := context.Background()

	rec := "v=spf1 " + strings.Join(includes, " ") + " include:nested.flat.test -all"
	flat, err := dnsfix.Flatten(ctx, r, "flat.test", rec)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(flat, "v=spf1 ip4:192.0.2.0 ip6:2001:db8:: ip4:192.0.2.1 "), flat)
	require.Contains(t, flat, "ip4:198.51.100.7")
	require.True(t, strings.HasSuffix(flat, " -all"))
	require.Equal(t, 1, strings.Count(flat, "ip4:192.0.2.1 "), "addresses are listed once")

	// An include that excludes addresses cannot be inlined: it is kept.
	kept, err := dnsfix.Flatten(ctx, r, "flat.test", "v=spf1 include:excl.flat.test include:_s2.flat.test -all")
	require.NoError(t, err)
	require.Equal(t, "v=spf1 include:excl.flat.test ip4:192.0.2.2 ip6:2001:db8::2 -all", kept)

	_, err = dnsfix.Flatten(ctx, r, "flat.test", "v=spf1 redirect=_s1.flat.test")
	require.ErrorIs(t, err, dnsfix.ErrCannotFlatten)
}

func TestNextMXState(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := []string{"no MX"}
	require.Equal(t, dnsfix.MXVerified, dnsfix.NextMXState(dnsfix.MXPending, nil, created, created))
	require.Equal(t, dnsfix.MXPending, dnsfix.NextMXState(dnsfix.MXPending, bad, created, created.Add(71*time.Hour)))
	require.Equal(t, dnsfix.MXFailed, dnsfix.NextMXState(dnsfix.MXPending, bad, created, created.Add(72*time.Hour)))
	require.Equal(t, dnsfix.MXLost, dnsfix.NextMXState(dnsfix.MXVerified, bad, created, created))
	require.Equal(t, dnsfix.MXLost, dnsfix.NextMXState(dnsfix.MXLost, bad, created, created.Add(100*time.Hour)))
	require.Equal(t, dnsfix.MXVerified, dnsfix.NextMXState(dnsfix.MXLost, nil, created, created))
}

func TestCheckMX(t *testing.T) {
	t.Parallel()
	cfg := dnsfix.MXConfig{Host: "mx.mailwatch.test"}
	s := dbsqlc.MxSetup{Name: "in.example.test", Token: "tok123"}
	ctx := context.Background()
	check := func(zone string) []string {
		srv := dnstest.Start(t, zone)
		p, err := dnsfix.CheckMX(ctx, dnscheck.NewClient(srv.Addr(), time.Second), cfg, s)
		require.NoError(t, err)
		return p
	}
	require.Empty(t, check("in.example.test. MX 10 mx.mailwatch.test.\n_mailwatch.in.example.test. TXT \"mailwatch-verification=tok123\"\n"))
	require.Len(t, check("in.example.test. MX 10 mx.mailwatch.test.\n"), 1, "no token")
	p := check("in.example.test. MX 10 mx.mailwatch.test.\nin.example.test. MX 5 mx.other.test.\n_mailwatch.in.example.test. TXT \"mailwatch-verification=tok123\"\n")
	require.Len(t, p, 1)
	require.Contains(t, p[0], "mx.other.test")
	p = check("in.example.test. MX 0 .\n_mailwatch.in.example.test. TXT \"mailwatch-verification=tok123\"\n")
	require.Contains(t, strings.Join(p, "|"), "null MX")
	p = check("in.example.test. CNAME elsewhere.test.\nelsewhere.test. MX 10 mx.mailwatch.test.\n_mailwatch.in.example.test. TXT \"mailwatch-verification=tok123\"\n")
	require.Contains(t, strings.Join(p, "|"), "CNAME")

	srv := dnstest.Start(t, "")
	srv.ServFail("in.example.test.")
	_, err := dnsfix.CheckMX(ctx, dnscheck.NewClient(srv.Addr(), time.Second), cfg, s)
	require.ErrorIs(t, err, dnsfix.ErrTemporary)
}
