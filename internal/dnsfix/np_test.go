package dnsfix_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// TestComputeNP: mail claiming subdomains that do not exist makes the
// DMARC recommendation add np=reject (DMARCbis), unless the record has np
// already or reject already applies to subdomains; without such mail
// nothing changes.
func TestComputeNP(t *testing.T) {
	t.Parallel()
	mail := &dnscheck.MXResult{Result: dnscheck.Result{Status: dnscheck.StatusPass}, Hosts: []dnscheck.MXHost{{Host: "mx.example.com"}}}
	results := func(rec string) *dnscheck.Results {
		parsed, err := dmarc.ParseRecord(rec)
		require.NoError(t, err)
		return &dnscheck.Results{MX: mail, DMARC: &dnscheck.DMARCResult{
			Result: dnscheck.Result{Status: "pass", Records: []string{rec}}, Parsed: parsed, Policy: parsed.Policy}}
	}
	names := []dnsfix.NonexistentName{
		{Name: "billing.example.com", Messages: 120, Passing: 0},
		{Name: "a.example.com", Messages: 5, Passing: 1},
		{Name: "b.example.com", Messages: 4},
		{Name: "c.example.com", Messages: 3},
	}

	recs := dnsfix.Compute("example.com", results("v=DMARC1; p=quarantine; rua=mailto:ops@example.com"), dnsfix.Inputs{NonexistentSubdomains: names})
	require.Len(t, recs, 1)
	require.Equal(t, "dmarc", recs[0].Key)
	require.Equal(t, []string{"v=DMARC1; p=quarantine; np=reject; rua=mailto:ops@example.com"}, recs[0].Proposed)
	require.Equal(t, dnsfix.SeverityWarning, recs[0].Severity)
	require.Contains(t, recs[0].Why, "np=reject")
	require.Contains(t, recs[0].Why, "132 messages claimed 4 subdomains")
	require.Contains(t, recs[0].Why, "billing.example.com: 120 messages, 0% passing DMARC")
	require.Contains(t, recs[0].Why, "1 more")
	require.True(t, recs[0].Selects(recs[0].Proposed[0]))

	recs = dnsfix.Compute("example.com", results("v=DMARC1; p=none; sp=quarantine"), dnsfix.Inputs{NonexistentSubdomains: names[:1]})
	require.Equal(t, []string{"v=DMARC1; p=none; sp=quarantine; np=reject"}, recs[0].Proposed, "after sp")

	for _, rec := range []string{
		"v=DMARC1; p=none; np=quarantine", // the owner chose np
		"v=DMARC1; p=reject",              // reject already applies to every subdomain
		"v=DMARC1; p=none; sp=reject",
	} {
		require.Empty(t, dnsfix.Compute("example.com", results(rec), dnsfix.Inputs{NonexistentSubdomains: names}), rec)
	}
	require.Empty(t, dnsfix.Compute("example.com", results("v=DMARC1; p=quarantine"), dnsfix.Inputs{}), "no such mail, no np")
}
