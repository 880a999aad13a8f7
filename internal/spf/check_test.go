package spf_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/spf"
)

const checkZone = `
$TTL 300
ip.check.          TXT "v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 -all"
soft.check.        TXT "v=spf1 ip4:192.0.2.1 ~all"
a.check.           TXT "v=spf1 a/24 -all"
a.check.           A 198.51.100.7
mx.check.          TXT "v=spf1 mx -all"
mx.check.          MX 10 mail.mx.check.
mail.mx.check.     A 203.0.113.5
inc.check.         TXT "v=spf1 include:ip.check -all"
incnone.check.     TXT "v=spf1 include:nothing.check -all"
redir.check.       TXT "v=spf1 redirect=ip.check"
macro.check.       TXT "v=spf1 exists:%{ir}.%{l1r+-}._spf.%{d} -all"
1.2.0.192.bob._spf.macro.check. A 127.0.0.2
twospf.check.      TXT "v=spf1 -all"
twospf.check.      TXT "v=spf1 +all"
voids.check.       TXT "v=spf1 a:v1.voids.check a:v2.voids.check a:v3.voids.check +all"
loop.check.        TXT "v=spf1 include:loop.check -all"
tf.check.          TXT "v=spf1 include:servfail.check -all"
helo.check.        TXT "v=spf1 ip4:192.0.2.9 -all"
`

func TestCheck(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, checkZone)
	srv.ServFail("servfail.check")
	r := dnscheck.NewClient(srv.Addr(), time.Second)
	ctx := context.Background()
	ip := netip.MustParseAddr

	tests := []struct {
		name   string
		client spf.Client
		domain string
		want   spf.Status
		mech   string
	}{
		{"ip4 match", spf.Client{IP: ip("192.0.2.1")}, "ip.check", spf.Pass, "ip4:192.0.2.0/24"},
		{"ip6 match", spf.Client{IP: ip("2001:db8::1")}, "ip.check", spf.Pass, "ip6:2001:db8::/32"},
		{"v4-mapped v6 client", spf.Client{IP: ip("::ffff:192.0.2.1")}, "ip.check", spf.Pass, "ip4:192.0.2.0/24"},
		{"no match -all", spf.Client{IP: ip("198.51.100.1")}, "ip.check", spf.Fail, "-all"},
		{"softfail", spf.Client{IP: ip("198.51.100.1")}, "soft.check", spf.Softfail, "~all"},
		{"a with cidr", spf.Client{IP: ip("198.51.100.200")}, "a.check", spf.Pass, "a/24"},
		{"mx host", spf.Client{IP: ip("203.0.113.5")}, "mx.check", spf.Pass, "mx"},
		{"mx other", spf.Client{IP: ip("203.0.113.6")}, "mx.check", spf.Fail, "-all"},
		{"include pass", spf.Client{IP: ip("192.0.2.77")}, "inc.check", spf.Pass, "include:ip.check"},
		{"include fail is no match", spf.Client{IP: ip("10.0.0.1")}, "inc.check", spf.Fail, "-all"},
		{"include of nothing", spf.Client{IP: ip("10.0.0.1")}, "incnone.check", spf.Permerror, ""},
		{"redirect", spf.Client{IP: ip("192.0.2.3")}, "redir.check", spf.Pass, "ip4:192.0.2.0/24"},
		{"macros i l d", spf.Client{IP: ip("192.0.2.1"), Sender: "bob@macro.check"}, "macro.check", spf.Pass, "exists:%{ir}.%{l1r+-}._spf.%{d}"},
		{"macros other sender", spf.Client{IP: ip("192.0.2.1"), Sender: "eve@macro.check"}, "macro.check", spf.Fail, "-all"},
		{"two records", spf.Client{IP: ip("192.0.2.1")}, "twospf.check", spf.Permerror, ""},
		{"three void lookups", spf.Client{IP: ip("192.0.2.1")}, "voids.check", spf.Permerror, ""},
		{"include loop hits the lookup limit", spf.Client{IP: ip("192.0.2.1")}, "loop.check", spf.Permerror, ""},
		{"servfail include", spf.Client{IP: ip("192.0.2.1")}, "tf.check", spf.Temperror, ""},
		{"no record", spf.Client{IP: ip("192.0.2.1")}, "none.check", spf.None, ""},
		{"not a domain", spf.Client{IP: ip("192.0.2.1")}, "localhost", spf.None, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := spf.Check(ctx, r, tc.client, tc.domain)
			require.Equal(t, tc.want, res.Status, "reason: %s", res.Reason)
			require.Equal(t, tc.mech, res.Mechanism)
			require.LessOrEqual(t, res.Lookups, spf.MaxLookups+1)
		})
	}
}

func TestCheckIdentities(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, checkZone)
	r := dnscheck.NewClient(srv.Addr(), time.Second)
	ctx := context.Background()
	c := spf.Client{IP: netip.MustParseAddr("192.0.2.9"), Helo: "helo.check", Sender: "someone@soft.check"}

	mf := spf.CheckMailFrom(ctx, r, c)
	require.Equal(t, spf.IdentityMailFrom, mf.Identity)
	require.Equal(t, "soft.check", mf.Domain)
	require.Equal(t, spf.Softfail, mf.Status)

	helo := spf.CheckHelo(ctx, r, c)
	require.Equal(t, spf.IdentityHelo, helo.Identity)
	require.Equal(t, spf.Pass, helo.Status)

	// The null sender is checked as postmaster@HELO (RFC 7208 section 2.4).
	c.Sender = ""
	bounce := spf.CheckMailFrom(ctx, r, c)
	require.Equal(t, "helo.check", bounce.Domain)
	require.Equal(t, spf.Pass, bounce.Status)
}

func TestReverseName(t *testing.T) {
	require.Equal(t, "1.2.0.192.in-addr.arpa.", spf.ReverseName(netip.MustParseAddr("192.0.2.1")))
	require.Equal(t, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", spf.ReverseName(netip.MustParseAddr("2001:db8::1")))
}
