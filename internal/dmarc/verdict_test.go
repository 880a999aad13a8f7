package dmarc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

func TestAligned(t *testing.T) {
	require.True(t, dmarc.Aligned("example.com", "example.com", dmarc.AlignStrict))
	require.True(t, dmarc.Aligned("example.com", "mail.example.com", dmarc.AlignRelaxed))
	require.False(t, dmarc.Aligned("example.com", "mail.example.com", dmarc.AlignStrict))
	require.False(t, dmarc.Aligned("example.com", "example.net", dmarc.AlignRelaxed))
	// Different registrations under one public suffix are not aligned.
	require.False(t, dmarc.Aligned("a.co.uk", "b.co.uk", dmarc.AlignRelaxed))
	require.False(t, dmarc.Aligned("", "example.com", dmarc.AlignRelaxed))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `
_dmarc.reject.example.    TXT "v=DMARC1; p=reject; sp=quarantine"
_dmarc.strict.example.    TXT "v=DMARC1; p=reject; aspf=s; adkim=s"
_dmarc.testing.example.   TXT "v=DMARC1; p=reject; t=y"
_dmarc.two.example.       TXT "v=DMARC1; p=none"
_dmarc.two.example.       TXT "v=DMARC1; p=reject"
`)
	srv.ServFail("_dmarc.broken.example")
	r := dnscheck.NewClient(srv.Addr(), time.Second)
	ctx := context.Background()

	tests := []struct {
		name        string
		from        string
		auth        dmarc.Authentication
		result      string
		disposition string
		spf, dkim   bool
	}{
		{"spf aligned", "reject.example", dmarc.Authentication{SPFPass: true, SPFDomain: "bounce.reject.example"}, dmarc.ResultPass, "none", true, false},
		{"dkim aligned", "reject.example", dmarc.Authentication{DKIMPassDomains: []string{"esp.example", "reject.example"}}, dmarc.ResultPass, "none", false, true},
		{"spf failed though aligned", "reject.example", dmarc.Authentication{SPFDomain: "reject.example"}, dmarc.ResultFail, "reject", false, false},
		{"unaligned", "reject.example", dmarc.Authentication{SPFPass: true, SPFDomain: "esp.example", DKIMPassDomains: []string{"esp.example"}}, dmarc.ResultFail, "reject", false, false},
		{"subdomain takes sp", "news.reject.example", dmarc.Authentication{}, dmarc.ResultFail, "quarantine", false, false},
		{"strict needs the exact domain", "strict.example", dmarc.Authentication{SPFPass: true, SPFDomain: "b.strict.example", DKIMPassDomains: []string{"d.strict.example"}}, dmarc.ResultFail, "reject", false, false},
		{"t=y lowers one level", "testing.example", dmarc.Authentication{}, dmarc.ResultFail, "quarantine", false, false},
		{"no record", "nothing.example", dmarc.Authentication{}, dmarc.ResultNone, "none", false, false},
		{"two records", "two.example", dmarc.Authentication{}, dmarc.ResultPermerror, "none", false, false},
		{"servfail", "broken.example", dmarc.Authentication{}, dmarc.ResultTemperror, "none", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := dmarc.Check(ctx, r, tc.from, tc.auth)
			require.Equal(t, tc.result, v.Result, v.Reason)
			require.Equal(t, tc.disposition, v.Disposition)
			require.Equal(t, tc.spf, v.SPFAligned)
			require.Equal(t, tc.dkim, v.DKIMAligned)
		})
	}
}
