package blocklist

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
)

func TestCatalog(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, l := range Catalog() {
		require.False(t, seen[l.Zone], "duplicate zone %s", l.Zone)
		seen[l.Zone] = true
		z, err := ValidateZone(l.Zone)
		require.NoError(t, err)
		require.Equal(t, z, l.Zone)
		require.Contains(t, []Kind{KindIP, KindDomain}, l.Kind)
		require.NotEmpty(t, l.Name)
		require.NotEmpty(t, l.Codes, l.Zone)
		require.True(t, strings.HasPrefix(l.DelistURL, "https://"), l.Zone)
		require.NotEmpty(t, l.UsagePolicy, l.Zone)
		require.True(t, l.Listed.IsValid() && loopback.Overlaps(l.Listed), l.Zone)
		for _, c := range l.Codes {
			require.True(t, l.Listed.Contains(c.Addr), "%s code %s outside its listing range", l.Zone, c.Addr)
			require.False(t, l.isError(c.Addr), "%s code %s is also an error code", l.Zone, c.Addr)
			require.NotEmpty(t, c.Name)
			require.NotEmpty(t, c.Meaning)
		}
	}
	require.True(t, seen["zen.spamhaus.org"] && seen["dbl.spamhaus.org"])

	zen := catalogList(t, "zen.spamhaus.org")
	pbl, ok := zen.code(netip.MustParseAddr("127.0.0.10"))
	require.True(t, ok)
	require.True(t, pbl.Informational)
	sbl, _ := zen.code(netip.MustParseAddr("127.0.0.2"))
	require.Equal(t, "SBL", sbl.Name)
	require.False(t, sbl.Informational)

	// Catalog returns a copy: changing it changes nothing for the next caller.
	c := Catalog()
	c[0].Codes[0].Name = "changed"
	require.NotEqual(t, "changed", Catalog()[0].Codes[0].Name)
}

func TestParseZones(t *testing.T) {
	t.Parallel()

	lists, err := ParseZones(" zen.spamhaus.org , DBL.Spamhaus.org., bl.example.net, uri.example.net=domain ")
	require.NoError(t, err)
	require.Len(t, lists, 4)
	require.Equal(t, "Spamhaus ZEN", lists[0].Name, "a catalog zone keeps its metadata")
	require.NotEmpty(t, lists[0].Codes)
	require.Equal(t, "dbl.spamhaus.org", lists[1].Zone)
	require.Equal(t, KindDomain, lists[1].Kind, "a catalog zone keeps its kind")
	require.Equal(t, "https://check.spamhaus.org/", lists[1].DelistURL)
	require.Equal(t, List{Name: "bl.example.net", Zone: "bl.example.net", Kind: KindIP, Listed: ipv4Listed}, lists[2])
	require.Equal(t, KindDomain, lists[3].Kind)
	require.Empty(t, lists[3].Codes)
	require.Equal(t, "zen.spamhaus.org,dbl.spamhaus.org=domain,bl.example.net,uri.example.net=domain", FormatZones(lists))

	lists, err = ParseZones("abc123key.zen.dq.spamhaus.net,abc123key.dbl.dq.spamhaus.net=domain")
	require.NoError(t, err)
	require.Equal(t, "Spamhaus ZEN", lists[0].Name, "a keyed subscriber zone takes the catalog's metadata")
	require.Equal(t, "abc123key.zen.dq.spamhaus.net", lists[0].Zone)
	require.Equal(t, KindDomain, lists[1].Kind)
	require.Equal(t, "Spamhaus DBL", lists[1].Name)

	lists, err = Lists("")
	require.NoError(t, err)
	require.Equal(t, Catalog(), lists)
	lists, err = Lists("bl.example.net")
	require.NoError(t, err)
	require.Len(t, lists, 1)

	many := strings.Repeat("a.example,", MaxZones) + "b.example"
	for _, bad := range []string{
		"",
		"   ",
		"zen.spamhaus.org,",
		",zen.spamhaus.org",
		"zen.spamhaus.org=domain",
		"bl.example.net=ip",
		"bl.example.net=",
		"bl.example.net,BL.example.net.",
		"com",
		"192.0.2.1",
		"bad..example",
		"-bad.example",
		"bad-.example",
		"bad example.net",
		"bäd.example",
		strings.Repeat("a", 64) + ".example",
		strings.Repeat("abcdefghi.", 19) + "example",
		many,
		strings.Repeat(" ", maxZonesInput+1),
	} {
		_, err := ParseZones(bad)
		require.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}

func TestIPQueryName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, zone, want string }{
		// RFC 5782 section 2.1 and 2.4 examples.
		{"192.168.42.23", "bad.example.com", "23.42.168.192.bad.example.com"},
		{"2001:db8:1:2:3:4:567:89ab", "ugly.example.com", "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ugly.example.com"},
		{"::ffff:192.0.2.1", "Zen.Spamhaus.org.", "1.2.0.192.zen.spamhaus.org"},
		{"::1", "a.example", strings.Repeat("0.", 0) + "1." + strings.Repeat("0.", 31) + "a.example"},
	} {
		got, err := IPQueryName(netip.MustParseAddr(tc.addr), tc.zone)
		require.NoError(t, err, tc.addr)
		require.Equal(t, tc.want, got, tc.addr)
	}
	_, err := IPQueryName(netip.Addr{}, "a.example")
	require.ErrorIs(t, err, ErrInvalid)
	_, err = IPQueryName(netip.MustParseAddr("192.0.2.1"), "bad..example")
	require.ErrorIs(t, err, ErrInvalid)
}

func TestDomainQueryName(t *testing.T) {
	t.Parallel()
	got, err := DomainQueryName("Example.COM.", "dbl.spamhaus.org")
	require.NoError(t, err)
	require.Equal(t, "example.com.dbl.spamhaus.org", got)
	got, err = DomainQueryName("test", "dbl.example")
	require.NoError(t, err, "RFC 5782 single-label test names")
	require.Equal(t, "test.dbl.example", got)

	longest := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", maxNameLength-3*64-len(".dbl.example"))
	got, err = DomainQueryName(longest, "dbl.example")
	require.NoError(t, err)
	require.Len(t, got, maxNameLength)

	for _, bad := range []string{"", ".", "192.0.2.1", "[2001:db8::1]", "a..example", "_dmarc.example.com", "bäd.example", "a b.example", longest + "x", strings.Repeat("a", 300)} {
		_, err := DomainQueryName(bad, "dbl.example")
		require.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}

func TestIsPublicResolver(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"8.8.8.8", "8.8.4.4:53", "[2001:4860:4860::8888]:53", "2001:4860:4860::8844", "1.1.1.1", "1.0.0.1:53", "2606:4700:4700::1111", "9.9.9.9", "149.112.112.112", "2620:fe::fe", "208.67.222.222", "208.67.220.220:53", "2620:119:35::35", "::ffff:8.8.8.8"} {
		require.True(t, IsPublicResolver(a), a)
	}
	name, ok := PublicResolver("1.1.1.1:53")
	require.True(t, ok)
	require.Equal(t, "Cloudflare", name)
	for _, a := range []string{"127.0.0.1:53", "127.0.0.53", "192.0.2.53", "resolver.example:53", "", "8.8.8.9", "[::1]:53"} {
		require.False(t, IsPublicResolver(a), a)
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	// One lookup per ~17 minutes, burst 1: the first Wait passes at once,
	// the second cannot finish within the context's deadline and fails
	// without waiting, and another zone has its own budget.
	l := NewLimiter(0.001, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, l.Wait(ctx, "a.example"))
	require.Error(t, l.Wait(ctx, "a.example"))
	require.NoError(t, l.Wait(ctx, "b.example"))

	d := NewLimiter(0, 0)
	require.Equal(t, float64(DefaultQueriesPerSecond), float64(d.limit))
	require.Equal(t, 1, d.burst)
}

func FuzzParseZones(f *testing.F) {
	for _, s := range []string{"zen.spamhaus.org", "zen.spamhaus.org,dbl.spamhaus.org=domain", "a.b=domain, c.d", "key.zen.dq.spamhaus.net", "x", "a..b", ",", "a.b=ip", "A.B.,a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lists, err := ParseZones(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		require.NotEmpty(t, lists)
		require.LessOrEqual(t, len(lists), MaxZones)
		for _, l := range lists {
			z, err := ValidateZone(l.Zone)
			require.NoError(t, err)
			require.Equal(t, z, l.Zone)
			require.True(t, dns.IsFqdn(l.Zone+"."))
			_, ok := dns.IsDomainName(l.Zone)
			require.True(t, ok)
		}
		again, err := ParseZones(FormatZones(lists))
		require.NoError(t, err)
		require.Equal(t, lists, again)
	})
}

func FuzzIPQueryName(f *testing.F) {
	f.Add([]byte{192, 0, 2, 1}, "zen.spamhaus.org")
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "A.example.")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, ip []byte, zone string) {
		a, _ := netip.AddrFromSlice(ip)
		name, err := IPQueryName(a, zone)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		z, err := ValidateZone(zone)
		require.NoError(t, err)
		require.LessOrEqual(t, len(name), maxNameLength)
		_, ok := dns.IsDomainName(name)
		require.True(t, ok, name)
		prefix, ok := strings.CutSuffix(name, "."+z)
		require.True(t, ok)
		// Reading the labels back gives the address again.
		labels := strings.Split(prefix, ".")
		a = a.Unmap()
		if a.Is4() {
			require.Len(t, labels, 4)
			back := netip.MustParseAddr(labels[3] + "." + labels[2] + "." + labels[1] + "." + labels[0])
			require.Equal(t, a, back)
			return
		}
		require.Len(t, labels, 32)
		var b strings.Builder
		for i := 31; i >= 0; i-- {
			b.WriteString(labels[i])
			if i%4 == 0 && i > 0 {
				b.WriteByte(':')
			}
		}
		back, err := netip.ParseAddr(b.String())
		require.NoError(t, err)
		require.Equal(t, a.WithZone(""), back)
	})
}

func FuzzDomainQueryName(f *testing.F) {
	f.Add("example.com", "dbl.spamhaus.org")
	f.Add("Example.COM.", "dbl.example")
	f.Add("test", "a.b")
	f.Add("1.2.3.4", "a.b")
	f.Fuzz(func(t *testing.T, domain, zone string) {
		name, err := DomainQueryName(domain, zone)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		z, err := ValidateZone(zone)
		require.NoError(t, err)
		require.LessOrEqual(t, len(name), maxNameLength)
		require.Equal(t, strings.ToLower(strings.TrimSuffix(domain, "."))+"."+z, name)
		require.Equal(t, strings.ToLower(name), name)
		_, ok := dns.IsDomainName(name)
		require.True(t, ok, name)
		for label := range strings.SplitSeq(name, ".") {
			require.NotEmpty(t, label)
			require.LessOrEqual(t, len(label), maxLabelLength)
		}
	})
}
