package spf_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/spf"
)

func setup(t *testing.T) *dnscheck.Client {
	t.Helper()
	zone, err := os.ReadFile("testdata/spf.zone")
	require.NoError(t, err)
	srv := dnstest.Start(t, string(zone))
	srv.ServFail("servfail.test")
	srv.ServFail("bad.incservfail.test")
	srv.Drop("timeout.test")
	srv.Drop("slow.incmxtimeout.test")
	return dnscheck.NewClient(srv.Addr(), 100*time.Millisecond)
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	client := setup(t)

	tests := []struct {
		domain      string
		status      spf.Status
		def         spf.Status
		lookups     int
		voids       int
		errContains string
		warnings    []string // substrings, one per expected warning
	}{
		{domain: "simple.test", status: spf.Pass, def: spf.Fail},
		{domain: "chain.test", status: spf.Pass, def: spf.Softfail, lookups: 4},
		{domain: "ten.test", status: spf.Pass, def: spf.Fail, lookups: 10, warnings: []string{"10 of the 10"}},
		{domain: "eleven.test", status: spf.Permerror, def: spf.Fail, lookups: 11, errContains: "needs 11 DNS lookups"},
		{domain: "nested.test", status: spf.Permerror, def: spf.Fail, lookups: 11, errContains: "needs 11 DNS lookups"},
		{domain: "exp.test", status: spf.Pass, def: spf.Fail, lookups: 10, warnings: []string{"10 of the 10"}},
		{domain: "void2.test", status: spf.Pass, def: spf.Fail, lookups: 2, voids: 2},
		{domain: "void3.test", status: spf.Permerror, def: spf.Fail, lookups: 3, voids: 3, errContains: "at most 2 void lookups"},
		{domain: "redirect.test", status: spf.Pass, def: spf.Fail, lookups: 2},
		{domain: "redirectnone.test", status: spf.Permerror, def: spf.Permerror, lookups: 1, voids: 1, errContains: "has no SPF record"},
		{domain: "redirectall.test", status: spf.Pass, def: spf.Fail, warnings: []string{"redirect is ignored"}},
		{domain: "redirectloop.test", status: spf.Permerror, def: spf.Permerror, lookups: 1, errContains: "redirect loop"},
		{domain: "manymx.test", status: spf.Permerror, def: spf.Fail, lookups: 1, errContains: "11 MX hosts"},
		{domain: "tenmx.test", status: spf.Pass, def: spf.Fail, lookups: 1},
		{domain: "loop.test", status: spf.Permerror, def: spf.Fail, lookups: 1, errContains: "include loop: loop.test -> loop.test"},
		{domain: "loopa.test", status: spf.Permerror, def: spf.Fail, lookups: 2, errContains: "include loop: loopa.test -> loopb.test -> loopa.test"},
		{domain: "diamond.test", status: spf.Pass, def: spf.Fail, lookups: 2},
		{domain: "multiple.test", status: spf.Permerror, errContains: "2 SPF records"},
		{domain: "includenone.test", status: spf.Permerror, def: spf.Fail, lookups: 1, voids: 1, errContains: "has no SPF record"},
		{domain: "syntax.test", status: spf.Permerror, def: spf.Permerror, errContains: "invalid address"},
		{domain: "unknownmech.test", status: spf.Permerror, def: spf.Permerror, errContains: "unknown mechanism"},
		{domain: "plusall.test", status: spf.Pass, def: spf.Pass, warnings: []string{"\"+all\" passes mail from every server"}},
		{domain: "neutralall.test", status: spf.Pass, def: spf.Neutral, warnings: []string{"\"?all\""}},
		{domain: "noall.test", status: spf.Pass, def: spf.Neutral, warnings: []string{"no \"all\" mechanism"}},
		{domain: "ptr.test", status: spf.Pass, def: spf.Fail, lookups: 1, warnings: []string{"ptr mechanism"}},
		{domain: "includeplusall.test", status: spf.Pass, def: spf.Fail, lookups: 1, warnings: []string{"\"+all\" passes", "include:plusall.test passes every sender"}},
		{domain: "macro.test", status: spf.Pass, def: spf.Fail, lookups: 2},
		{domain: "split.test", status: spf.Pass, def: spf.Fail},
		{domain: "nodata.test", status: spf.None},
		{domain: "nxdomain.test", status: spf.None},
		{domain: "servfail.test", status: spf.Temperror, errContains: "SERVFAIL"},
		{domain: "incservfail.test", status: spf.Temperror, def: spf.Fail, lookups: 1, errContains: "SERVFAIL"},
		{domain: "timeout.test", status: spf.Temperror, errContains: "timeout"},
		{domain: "incmxtimeout.test", status: spf.Temperror, def: spf.Fail, lookups: 1, errContains: "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.domain, func(t *testing.T) {
			t.Parallel()
			ev := spf.Evaluate(context.Background(), client, tc.domain)
			require.Equal(t, tc.status, ev.Status, "errors: %v", ev.Errors)
			require.Equal(t, tc.def, ev.Default)
			require.Equal(t, tc.lookups, ev.Lookups, "trace: %+v", ev.Trace)
			require.Equal(t, tc.voids, ev.VoidLookups)
			if tc.errContains != "" {
				require.Contains(t, strings.Join(ev.Errors, "\n"), tc.errContains)
			} else {
				require.Empty(t, ev.Errors)
			}
			require.Len(t, ev.Warnings, len(tc.warnings), "warnings: %q", ev.Warnings)
			for i, w := range tc.warnings {
				require.Contains(t, ev.Warnings[i], w)
			}
		})
	}
}

func TestEvaluateTrace(t *testing.T) {
	t.Parallel()
	client := setup(t)

	ev := spf.Evaluate(context.Background(), client, "chain.test")
	require.Equal(t, spf.Pass, ev.Status)
	require.Equal(t, "v=spf1 include:a.chain.test mx a ~all", ev.Record)

	type row struct {
		depth   int
		term    string
		target  string
		lookups int
		total   int
		result  string
	}
	var got []row
	for _, s := range ev.Trace {
		got = append(got, row{s.Depth, s.Term, s.Target, s.Lookups, s.Total, s.Result})
	}
	require.Equal(t, []row{
		{0, "include:a.chain.test", "a.chain.test", 1, 1, spf.StepOK},
		{1, "include:b.chain.test", "b.chain.test", 1, 2, spf.StepOK},
		{2, "ip4:203.0.113.0/24", "203.0.113.0/24", 0, 2, spf.StepOK},
		{2, "-all", "", 0, 2, spf.StepOK},
		{1, "ip4:198.51.100.0/24", "198.51.100.0/24", 0, 2, spf.StepOK},
		{1, "~all", "", 0, 2, spf.StepOK},
		{0, "mx", "chain.test", 1, 3, spf.StepOK},
		{0, "a", "chain.test", 1, 4, spf.StepOK},
		{0, "~all", "", 0, 4, spf.StepOK},
	}, got)
	require.Equal(t, "lookups inside the included record: 1", ev.Trace[0].Detail)
	require.Equal(t, "1 MX hosts, 1 addresses", ev.Trace[6].Detail)

	// exp is in the trace but counts no lookup.
	ev = spf.Evaluate(context.Background(), client, "exp.test")
	last := ev.Trace[len(ev.Trace)-1]
	require.Equal(t, "exp", last.Mechanism)
	require.Equal(t, 0, last.Lookups)
	require.Equal(t, spf.StepSkipped, last.Result)

	// Void lookups are marked.
	ev = spf.Evaluate(context.Background(), client, "void3.test")
	for _, s := range ev.Trace[:3] {
		require.Equal(t, spf.StepVoid, s.Result)
	}
}
