package health

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// results builds Results with the given statuses; missing checks pass.
func results(statuses map[string]string, dmarcPolicy, spfDefault string) *dnscheck.Results {
	st := func(name string) dnscheck.Result {
		s, ok := statuses[name]
		if !ok {
			s = dnscheck.StatusPass
		}
		return dnscheck.Result{Status: s}
	}
	return &dnscheck.Results{
		Domain: "example.com",
		SPF:    &dnscheck.SPFResult{Result: st(dnscheck.NameSPF), Default: spfDefault},
		DMARC:  &dnscheck.DMARCResult{Result: st(dnscheck.NameDMARC), Policy: dmarcPolicy},
		DKIM:   &dnscheck.DKIMResult{Result: st(dnscheck.NameDKIM)},
		MX:     &dnscheck.MXResult{Result: st(dnscheck.NameMX)},
		MTASTS: &dnscheck.MTASTSResult{Result: st(dnscheck.NameMTASTS)},
		TLSRPT: &dnscheck.TLSRPTResult{Result: st(dnscheck.NameTLSRPT)},
		BIMI:   &dnscheck.BIMIResult{Result: st(dnscheck.NameBIMI)},
		DNSSEC: &dnscheck.DNSSECResult{Result: st(dnscheck.NameDNSSEC)},
	}
}

func TestWeightsSumTo100(t *testing.T) {
	t.Parallel()
	sum := 0
	for _, c := range weights() {
		sum += c.Weight
	}
	require.Equal(t, 100, sum)
}

func TestScore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		statuses   map[string]string
		policy     string
		spfDefault string
		want       int
	}{
		{"Perfect", nil, "reject", "fail", 100},
		{"Quarantine", nil, "quarantine", "fail", 95},
		{"MonitoringOnly", map[string]string{dnscheck.NameDMARC: dnscheck.StatusWarn}, "none", "fail", 85},
		{"NoDMARC", map[string]string{dnscheck.NameDMARC: dnscheck.StatusNone}, "", "fail", 75},
		{"PlusAll", map[string]string{dnscheck.NameSPF: dnscheck.StatusWarn}, "reject", "pass", 80},
		{"SoftSPF", map[string]string{dnscheck.NameSPF: dnscheck.StatusWarn}, "reject", "neutral", 92},
		{"Basic", map[string]string{
			dnscheck.NameMTASTS: dnscheck.StatusNone, dnscheck.NameTLSRPT: dnscheck.StatusNone,
			dnscheck.NameBIMI: dnscheck.StatusNone, dnscheck.NameDNSSEC: dnscheck.StatusNone,
		}, "reject", "fail", 75},
		{"UnknownDKIM", map[string]string{dnscheck.NameDKIM: dnscheck.StatusNeutral}, "reject", "fail", 90},
		{"Nothing", map[string]string{
			dnscheck.NameSPF: dnscheck.StatusNone, dnscheck.NameDMARC: dnscheck.StatusNone, dnscheck.NameDKIM: dnscheck.StatusNeutral,
			dnscheck.NameMX: dnscheck.StatusNone, dnscheck.NameMTASTS: dnscheck.StatusNone, dnscheck.NameTLSRPT: dnscheck.StatusNone,
			dnscheck.NameBIMI: dnscheck.StatusNone, dnscheck.NameDNSSEC: dnscheck.StatusNone,
		}, "", "", 10},
		// A temperror is left out and the rest rescaled: 75/75 = 100.
		{"TemperrorLeftOut", map[string]string{dnscheck.NameDMARC: dnscheck.StatusTemperror}, "", "fail", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := Score(results(tc.statuses, tc.policy, tc.spfDefault))
			require.Equal(t, tc.want, rep.Score, "%+v", rep.Components)
			require.True(t, rep.Complete)
			require.Len(t, rep.Components, 8)
			for _, c := range rep.Components {
				require.NotEmpty(t, c.Reason)
				require.LessOrEqual(t, c.Points, float64(c.Weight))
			}
		})
	}

	t.Run("AllTemperror", func(t *testing.T) {
		t.Parallel()
		st := map[string]string{}
		for _, n := range dnscheck.Names() {
			st[n] = dnscheck.StatusTemperror
		}
		rep := Score(results(st, "", ""))
		require.False(t, rep.Complete)
		require.Equal(t, 0, rep.Score)
		require.Len(t, rep.Unknown, 8)
	})
}

func TestCaps(t *testing.T) {
	t.Parallel()
	var caps []Cap
	if c, ok := DMARCPassRateCap(0.85, 1000); ok {
		caps = append(caps, c)
	}
	if c, ok := BounceRateCap(0.01, 1000); ok {
		caps = append(caps, c)
	}
	if c, ok := ComplaintRateCap(0.004, 1000); ok {
		caps = append(caps, c)
	}
	require.Len(t, caps, 2)
	rep := Score(results(nil, "reject", "fail"), caps...)
	require.Equal(t, 100, rep.Uncapped)
	require.Equal(t, 45, rep.Score)
	require.Equal(t, "complaint_rate", rep.Applied.Name)
	require.Contains(t, rep.Applied.Reason, "0.40%")

	_, ok := DMARCPassRateCap(0.1, 10)
	require.False(t, ok, "too few messages to judge")
	c, ok := DMARCPassRateCap(0.5, 200)
	require.True(t, ok)
	require.Equal(t, 50, c.Max)
	c, ok = BounceRateCap(0.2, 600)
	require.True(t, ok)
	require.Equal(t, 40, c.Max)
	_, ok = ComplaintRateCap(0.0005, 600)
	require.False(t, ok)
}

func TestCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		prev, cur      int
		hasPrev        bool
		emit, critical bool
	}{
		{"First", 0, 40, false, false, false},
		{"Small", 80, 76, true, false, false},
		{"Five", 80, 75, true, true, false},
		{"Rise", 60, 70, true, true, false},
		{"RiseStillLow", 30, 45, true, true, false},
		{"FallBelow50", 55, 49, true, true, true},
		{"FallBy20", 95, 75, true, true, true},
		{"SmallFallBelow50", 52, 48, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Compare(tc.prev, tc.cur, tc.hasPrev)
			require.Equal(t, tc.emit, c.Emit)
			require.Equal(t, tc.critical, c.Critical)
		})
	}
}

// TestScoreNXDOMAIN checks a domain that does not exist, through real
// checks against a loopback DNS server: it scores 0 and says why, where a
// domain that exists and publishes nothing scores 10.
func TestScoreNXDOMAIN(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `exists.test. 300 IN A 192.0.2.1`)
	resolver := dnscheck.NewClient(srv.Addr(), time.Second)
	check := func(domain string) Report {
		return Score(dnscheck.CheckAll(context.Background(), domain, dnscheck.Options{Resolver: resolver, SkipSelectorProbe: true}))
	}

	rep := check("gone.test")
	require.True(t, rep.Complete)
	require.True(t, rep.NXDomain)
	require.Equal(t, 0, rep.Score)
	require.Empty(t, rep.Unknown)
	require.Len(t, rep.Components, 8)
	for _, c := range rep.Components {
		require.Zero(t, c.Points, c.Name)
		require.Equal(t, "the domain does not exist in DNS (NXDOMAIN)", c.Reason, c.Name)
	}

	rep = check("exists.test")
	require.False(t, rep.NXDomain)
	require.Equal(t, 10, rep.Score, "%+v", rep.Components)
}

func TestBlocklistCap(t *testing.T) {
	_, ok := BlocklistCap(0)
	require.False(t, ok, "nothing listed, no cap")
	for _, tc := range []struct {
		share float64
		max   int
	}{{0.01, 80}, {0.1, 60}, {0.4, 60}, {0.5, 40}, {1, 40}} {
		c, ok := BlocklistCap(tc.share)
		require.True(t, ok)
		require.Equal(t, tc.max, c.Max, "share %v", tc.share)
		require.Equal(t, "blocklist", c.Name)
	}
}
