package spf

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRecord(t *testing.T) {
	t.Parallel()

	r, err := ParseRecord("v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 a mx:mail.example.com/24//64 a//48 ~include:_spf.example.net ?exists:%{i}.bl.example.org ptr -all redirect=_spf.example.com exp=explain.%{d} foo.bar=baz")
	require.NoError(t, err)
	require.Len(t, r.Directives, 9)
	require.Equal(t, netip.MustParsePrefix("192.0.2.0/24"), r.Directives[0].Network)
	require.Equal(t, netip.MustParsePrefix("2001:db8::/32"), r.Directives[1].Network)
	require.Equal(t, "a", r.Directives[2].Mechanism)
	require.Equal(t, Directive{Qualifier: '+', Mechanism: "mx", DomainSpec: "mail.example.com", IP4CIDR: 24, IP6CIDR: 64, Raw: "mx:mail.example.com/24//64"}, r.Directives[3])
	require.Equal(t, -1, r.Directives[4].IP4CIDR)
	require.Equal(t, 48, r.Directives[4].IP6CIDR)
	require.Equal(t, Softfail, r.Directives[5].Result())
	require.Equal(t, "%{i}.bl.example.org", r.Directives[6].DomainSpec)
	require.Equal(t, Fail, r.Directives[8].Result())
	require.Equal(t, "_spf.example.com", r.Redirect)
	require.Equal(t, "explain.%{d}", r.Explanation)
	require.Equal(t, []Modifier{{Name: "foo.bar", Value: "baz"}}, r.Unknown)

	for _, ok := range []string{
		"v=spf1",
		"V=SPF1 -ALL",
		"v=spf1   ip4:192.0.2.1   -all  ",
		"v=spf1 ip4:192.0.2.1/32 ip6:::1/128",
		"v=spf1 include:_spf.%{d2}",
		"v=spf1 exists:%{ir}.%{l1r+-}._spf.%{d}",
		"v=spf1 a:example.com. mx:example-.x-y",
	} {
		_, err := ParseRecord(ok)
		require.NoError(t, err, ok)
	}

	for _, bad := range []struct{ rec, msg string }{
		{"v=spf10 -all", "does not start"},
		{"spf1 -all", "does not start"},
		{"v=spf1 foo", "unknown mechanism"},
		{"v=spf1 all:example.com", "no argument"},
		{"v=spf1 include", "requires"},
		{"v=spf1 include:", "requires"},
		{"v=spf1 include:example", "top-level"},
		{"v=spf1 include:example.123", "top-level"},
		{"v=spf1 ip4:192.0.2.1/33", "CIDR length"},
		{"v=spf1 ip4:192.0.2.1/024", "CIDR length"},
		{"v=spf1 ip4:2001:db8::1", "not an ip4"},
		{"v=spf1 ip6:192.0.2.1", "not an ip6"},
		{"v=spf1 ip4:192.0.2", "invalid address"},
		{"v=spf1 a/129", "CIDR length"},
		{"v=spf1 a//129", "CIDR length"},
		{"v=spf1 exists:%{x}.example.com", "unknown macro letter"},
		{"v=spf1 exists:%{d0}.example.com", "not allowed"},
		{"v=spf1 exists:%{d.example.com", "unterminated"},
		{"v=spf1 exists:%q.example.com", "invalid macro"},
		{"v=spf1 redirect=a.example.com redirect=b.example.com", "more than one redirect"},
		{"v=spf1 exp=a.example.com exp=b.example.com", "more than one exp"},
		{"v=spf1 -all\t", "unknown mechanism"},
		{"v=spf1 include:ex\x00ample.com", "invalid character"},
		{"v=spf1 " + strings.Repeat("a ", MaxRecordLength), "longer than"},
	} {
		_, err := ParseRecord(bad.rec)
		require.ErrorIs(t, err, ErrSyntax, bad.rec)
		require.Contains(t, err.Error(), bad.msg, bad.rec)
	}
}

func TestExpandDomainSpec(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		spec, want string
		ok         bool
	}{
		{"example.com.", "example.com", true},
		{"_spf.%{d}", "_spf.mail.example.com", true},
		{"_spf.%{d2}", "_spf.example.com", true},
		{"%{dr}", "com.example.mail", true},
		{"%{d1r}", "mail", true},
		{"%{d-}", "mail.example.com", true},
		{"a%%b.%{d}", "a%b.mail.example.com", true},
		{"%{i}.%{d}", "", false},
		{"%{l}._spf.%{d}", "", false},
	} {
		got, ok := expandDomainSpec(tc.spec, "mail.example.com")
		require.Equal(t, tc.ok, ok, tc.spec)
		require.Equal(t, tc.want, got, tc.spec)
	}
}

func FuzzParseSPF(f *testing.F) {
	for _, s := range []string{
		"v=spf1 -all",
		"v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 include:_spf.example.com ~all",
		"v=spf1 a mx:mail.example.com/24//64 ptr exists:%{i}._spf.%{d} ?all",
		"v=spf1 redirect=_spf.example.com exp=explain.%{d2r+}",
		"v=spf1 a//64 mx/24 foo=bar",
		"v=spf1 include:%{d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRecord(s)
		if err != nil {
			return
		}
		for _, d := range r.Directives {
			if d.DomainSpec != "" {
				_, _ = expandDomainSpec(d.DomainSpec, "example.com")
			}
		}
	})
}
