package dmarc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRecord(t *testing.T) {
	t.Parallel()

	r, err := ParseRecord("v=DMARC1; p=Reject; sp=quarantine; np=reject; adkim=s; aspf=r; pct=100; rua=mailto:a@example.com!10m, mailto:b@Reports.Example.net; ruf=mailto:f@example.com!500k; fo=1:d; t=n; psd=u; x-future=1;")
	require.NoError(t, err)
	require.Equal(t, &Record{
		Policy: "reject", SubdomainPolicy: "quarantine", NonexistentPolicy: "reject",
		ADKIM: "s", ASPF: "r", Percent: 100,
		AggregateURIs: []URI{
			{Raw: "mailto:a@example.com", Scheme: "mailto", Address: "a@example.com", Domain: "example.com", MaxSize: 10 << 20},
			{Raw: "mailto:b@Reports.Example.net", Scheme: "mailto", Address: "b@Reports.Example.net", Domain: "reports.example.net"},
		},
		FailureURIs:    []URI{{Raw: "mailto:f@example.com", Scheme: "mailto", Address: "f@example.com", Domain: "example.com", MaxSize: 500 << 10}},
		FailureOptions: "1:d", ReportFormat: "afrf", ReportInterval: 86400, Testing: "n", PSD: "u",
		Tags:    []string{"p", "sp", "np", "adkim", "aspf", "pct", "rua", "ruf", "fo", "t", "psd", "x-future"},
		Unknown: []string{"x-future"},
	}, r)

	r, err = ParseRecord("v = DMARC1 ;p=none")
	require.NoError(t, err)
	require.Equal(t, "none", r.Policy)
	require.Equal(t, 100, r.Percent)

	r, err = ParseRecord("v=DMARC1; p=none; rua=mailto:dmarc%2Btoken@example.com")
	require.NoError(t, err)
	require.Equal(t, "dmarc+token@example.com", r.AggregateURIs[0].Address)

	for _, bad := range []struct{ rec, msg string }{
		{"v=DMARC2; p=none", "does not start"},
		{"p=none; v=DMARC1", "does not start"},
		{"v=dmarc1; p=none", "does not start"},
		{"v=DMARC1; p=block", "tag p"},
		{"v=DMARC1; p=none; p=reject", "more than once"},
		{"v=DMARC1; p=none; v=DMARC1", "first tag"},
		{"v=DMARC1; p=none; adkim=x", "tag adkim"},
		{"v=DMARC1; p=none; pct=101", "tag pct"},
		{"v=DMARC1; p=none; pct=-1", "tag pct"},
		{"v=DMARC1; p=none; rua=dmarc@example.com", "not a URI"},
		{"v=DMARC1; p=none; rua=mailto:not-an-address", "valid email address"},
		{"v=DMARC1; p=none; rua=mailto:a@example.com!x", "size limit"},
		{"v=DMARC1; p=none; rua=mailto:a@example.com,", "empty URI"},
		{"v=DMARC1; p=none; fo=2", "tag fo"},
		{"v=DMARC1; p=none; ri=soon", "tag ri"},
		{"v=DMARC1; p=none; t=maybe", "tag t"},
		{"v=DMARC1; p=none; psd=x", "tag psd"},
		{"v=DMARC1; p", "tag=value"},
		{"v=DMARC1; p=none; x=" + strings.Repeat("a", MaxRecordLength), "longer than"},
	} {
		_, err := ParseRecord(bad.rec)
		require.ErrorIs(t, err, ErrSyntax, bad.rec)
		require.Contains(t, err.Error(), bad.msg, bad.rec)
	}
}

func FuzzParseDMARC(f *testing.F) {
	for _, s := range []string{
		"v=DMARC1; p=reject",
		"v=DMARC1; p=none; rua=mailto:a@example.com!10m,mailto:b@example.net; ruf=mailto:c@example.org",
		"v=DMARC1; p=quarantine; sp=none; np=reject; adkim=s; aspf=s; pct=50; fo=1:d:s; rf=afrf; ri=3600; t=y; psd=n",
		"v=DMARC1;p=reject;;",
		"v=DMARC1; rua=https://example.com/x!1g",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRecord(s)
		if err != nil {
			return
		}
		if r.Percent < 0 || r.Percent > 100 {
			t.Fatalf("pct out of range: %d", r.Percent)
		}
		for _, u := range append(r.AggregateURIs, r.FailureURIs...) {
			if u.Scheme == "mailto" && u.Domain == "" {
				t.Fatalf("mailto URI %q without domain", u.Raw)
			}
		}
	})
}
