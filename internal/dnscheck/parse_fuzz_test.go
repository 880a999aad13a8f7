package dnscheck

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsers(t *testing.T) {
	t.Parallel()

	rec, err := ParseSTSRecord("v=STSv1; id=20190429T010101;")
	require.NoError(t, err)
	require.Equal(t, "20190429T010101", rec.ID)
	for _, bad := range []string{"", "v=STSv1", "v=STSv2; id=1", "; v=STSv1; id=1", "v=STSv1; id=" + string(make([]byte, 33)), "v=STSv1; id=1; id=2"} {
		_, err := ParseSTSRecord(bad)
		require.Error(t, err, bad)
	}

	p, err := ParseSTSPolicy("version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmax_age: 86400\r\nfuture: x\r\n")
	require.NoError(t, err)
	require.Equal(t, &STSPolicy{Mode: "enforce", MaxAge: 86400, MX: []string{"mail.example.com", "*.example.net"}}, p)
	require.True(t, p.Matches("MAIL.example.com."))
	require.True(t, p.Matches("mx1.example.net"))
	require.False(t, p.Matches("a.b.example.net"), "a wildcard matches one label only")
	require.False(t, p.Matches("example.net"))
	for _, bad := range []string{"mode: enforce\nmx: a\nmax_age: 1", "version: STSv1\nmode: enforce\nmax_age: 1", "version: STSv1\nmode: testing\nmx: a\nmax_age: 99999999", "version: STSv1\nmode: none"} {
		_, err := ParseSTSPolicy(bad)
		require.Error(t, err, bad)
	}
	p, err = ParseSTSPolicy("version: STSv1\nmode: none\nmax_age: 0")
	require.NoError(t, err)
	require.Equal(t, "none", p.Mode)

	tr, err := ParseTLSRPT("v=TLSRPTv1;rua=mailto:a@example.com, https://example.com/r")
	require.NoError(t, err)
	require.Equal(t, []string{"mailto:a@example.com", "https://example.com/r"}, tr.RUA)

	bimi, err := ParseBIMI("v=BIMI1; l=; a=;")
	require.NoError(t, err)
	require.Equal(t, &BIMIRecord{}, bimi)

	k, err := ParseDKIMKey("k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs=; t=y:s; h=sha256")
	require.NoError(t, err)
	require.Equal(t, &DKIMKey{KeyType: "ed25519", Bits: 256, Testing: true, HashAlgorithms: []string{"sha256"}}, k)
	for _, bad := range []string{"k=rsa", "p=AAAA; v=DKIM1", "k=dsa; p=", "p=!!!", "k=ed25519; p=AAAA", "p=; p="} {
		_, err := ParseDKIMKey(bad)
		require.Error(t, err, bad)
	}
}

func FuzzParseDKIMKey(f *testing.F) {
	for _, s := range []string{"v=DKIM1; k=rsa; p=", "k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs=", "v=DKIM1; h=sha256; t=y; p=MIIBIjANBg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseDKIMKey(s)
		if err == nil && !k.Revoked && k.Bits == 0 {
			t.Fatalf("key without size: %q", s)
		}
	})
}

func FuzzParseSTSRecord(f *testing.F) {
	for _, s := range []string{"v=STSv1; id=1", "v=STSv1;id=abc;ext=1;", "v=STSv2; id=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseSTSRecord(s)
	})
}

func FuzzParseSTSPolicy(f *testing.F) {
	for _, s := range []string{"version: STSv1\nmode: enforce\nmx: *.example.com\nmax_age: 604800\n", "version: STSv1\r\nmode: none\r\nmax_age: 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseSTSPolicy(s)
		if err == nil {
			_ = p.Matches("mx.example.com")
		}
	})
}

func FuzzParseTLSRPT(f *testing.F) {
	for _, s := range []string{"v=TLSRPTv1; rua=mailto:a@example.com", "v=TLSRPTv1;rua=https://example.com/x,mailto:b@example.org"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseTLSRPT(s)
	})
}

func FuzzParseBIMI(f *testing.F) {
	for _, s := range []string{"v=BIMI1; l=https://example.com/l.svg; a=https://example.com/a.pem", "v=BIMI1; l=;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseBIMI(s)
	})
}
