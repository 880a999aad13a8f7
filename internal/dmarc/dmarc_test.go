package dmarc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()

	zone, err := os.ReadFile("testdata/dmarc.zone")
	require.NoError(t, err)
	srv := dnstest.Start(t, string(zone))
	srv.ServFail("_dmarc.servfail.example")
	srv.Drop("_dmarc.timeout.example")
	srv.Drop("external.example._report._dmarc.unauthorised.test")
	client := dnscheck.NewClient(srv.Addr(), 100*time.Millisecond)

	tests := []struct {
		domain       string
		opts         dmarc.Options
		status       dmarc.Status
		policy       string
		recordDomain string
		errors       []string
		warnings     []string
		instructions int
	}{
		{domain: "reject.example", status: dmarc.Pass, policy: "reject", recordDomain: "reject.example"},
		{domain: "quarantine.example", status: dmarc.Pass, policy: "quarantine", recordDomain: "quarantine.example", instructions: 1},
		{domain: "monitor.example", status: dmarc.Pass, policy: "none", recordDomain: "monitor.example", warnings: []string{"policy is none"}, instructions: 1},
		{domain: "norua.example", status: dmarc.Pass, policy: "reject", recordDomain: "norua.example", warnings: []string{"no rua"}, instructions: 1},
		{domain: "obsolete.example", status: dmarc.Pass, policy: "reject", recordDomain: "obsolete.example", warnings: []string{"pct is obsolete", "pct=50", "rf is obsolete", "ri is obsolete"}, instructions: 1},
		{domain: "bis.example", status: dmarc.Pass, policy: "reject", recordDomain: "bis.example", warnings: []string{"t=y"}},
		{domain: "spnone.example", status: dmarc.Pass, policy: "reject", recordDomain: "spnone.example", warnings: []string{"sp=none"}, instructions: 1},
		{domain: "multiple.example", status: dmarc.Permerror, recordDomain: "multiple.example", errors: []string{"2 DMARC records"}, instructions: 1},
		{domain: "syntax.example", status: dmarc.Permerror, recordDomain: "syntax.example", errors: []string{"tag p: value must be one of none, quarantine, reject, not \"block\""}, instructions: 1},
		{domain: "nop.example", status: dmarc.Pass, policy: "none", recordDomain: "nop.example", warnings: []string{"no p tag", "policy is none"}, instructions: 1},
		{domain: "nopnorua.example", status: dmarc.Permerror, recordDomain: "nopnorua.example", errors: []string{"no p tag and no rua"}, instructions: 1},
		{domain: "notdmarc.example", status: dmarc.None, errors: []string{"no DMARC record"}, instructions: 1},
		{domain: "nxdomain.example", status: dmarc.None, errors: []string{"no DMARC record"}, instructions: 1},
		{domain: "reject.example", opts: dmarc.Options{ReportAddress: "dmarc+tok@reports.mailwatch.test"}, status: dmarc.Pass, policy: "reject", recordDomain: "reject.example", warnings: []string{"does not include the mailwatch reporting address"}, instructions: 1},
		{domain: "mailwatch.example", opts: dmarc.Options{ReportAddress: "dmarc+tok@reports.mailwatch.test"}, status: dmarc.Pass, policy: "reject", recordDomain: "mailwatch.example"},
		{domain: "external.example", status: dmarc.Pass, policy: "reject", recordDomain: "external.example", warnings: []string{"could not verify that unauthorised.test"}},
		{domain: "sub.org.co.uk", status: dmarc.Pass, policy: "quarantine", recordDomain: "org.co.uk", warnings: []string{"organizational domain org.co.uk applies (policy quarantine)"}, instructions: 1},
		{domain: "servfail.example", status: dmarc.Temperror, errors: []string{"SERVFAIL"}},
		{domain: "timeout.example", status: dmarc.Temperror, errors: []string{"timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.domain, func(t *testing.T) {
			t.Parallel()
			ev := dmarc.Evaluate(context.Background(), client, tc.domain, tc.opts)
			require.Equal(t, tc.status, ev.Status, "errors: %v", ev.Errors)
			require.Equal(t, tc.policy, ev.EffectivePolicy)
			if tc.status != dmarc.Temperror {
				require.Equal(t, tc.recordDomain, ev.RecordDomain)
			}
			require.Len(t, ev.Errors, len(tc.errors), "errors: %q", ev.Errors)
			for i, e := range tc.errors {
				require.Contains(t, ev.Errors[i], e)
			}
			require.Len(t, ev.Warnings, len(tc.warnings), "warnings: %q", ev.Warnings)
			for i, w := range tc.warnings {
				require.Contains(t, ev.Warnings[i], w)
			}
			require.Len(t, ev.Instructions, tc.instructions, "instructions: %q", ev.Instructions)
		})
	}

	t.Run("ExternalDestinations", func(t *testing.T) {
		t.Parallel()
		ev := dmarc.Evaluate(context.Background(), client, "external.example", dmarc.Options{})
		require.Equal(t, []dmarc.External{
			{Destination: "reports.mailwatch.test", Name: "external.example._report._dmarc.reports.mailwatch.test", Authorized: true},
			{Destination: "unauthorised.test", Name: "external.example._report._dmarc.unauthorised.test", Error: ev.External[1].Error},
		}, ev.External)
		require.NotEmpty(t, ev.External[1].Error)
	})

	t.Run("Unauthorised", func(t *testing.T) {
		t.Parallel()
		ok, err := dmarc.VerifyExternal(context.Background(), client, "reject.example", "nowhere.test")
		require.NoError(t, err)
		require.False(t, ok)
		ok, err = dmarc.VerifyExternal(context.Background(), client, "anything.example", "reports.mailwatch.test")
		require.NoError(t, err)
		require.True(t, ok)
	})
}

func TestOrganizationalDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"example.com":           "example.com",
		"mail.example.com":      "example.com",
		"a.b.example.co.uk":     "example.co.uk",
		"someone.github.io":     "someone.github.io",
		"x.someone.github.io":   "someone.github.io",
		"com":                   "com",
		strings.Repeat("a", 10): strings.Repeat("a", 10),
	} {
		require.Equal(t, want, dmarc.OrganizationalDomain(in), in)
	}
}
