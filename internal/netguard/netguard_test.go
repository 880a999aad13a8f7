package netguard

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		ip   string
		want Reason
	}{
		// Public.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"100.63.255.255", ""}, // just below CGNAT
		{"100.128.0.0", ""},    // just above CGNAT
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"192.0.1.1", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"2001:4860:4860::8888", ""},

		// IPv4 special ranges.
		{"0.0.0.0", ReasonUnspecified},
		{"0.1.2.3", ReasonReserved},
		{"10.0.0.1", ReasonPrivate},
		{"10.255.255.255", ReasonPrivate},
		{"100.64.0.1", ReasonSharedCGNAT},
		{"100.127.255.254", ReasonSharedCGNAT},
		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.254", ReasonLoopback},
		{"169.254.0.1", ReasonLinkLocal},
		{"169.254.169.254", ReasonMetadata},
		{"169.254.170.2", ReasonMetadata},
		{"100.100.100.200", ReasonMetadata},
		{"192.0.0.192", ReasonMetadata},
		{"172.16.0.1", ReasonPrivate},
		{"172.31.255.255", ReasonPrivate},
		{"192.0.0.8", ReasonReserved},
		{"192.0.2.10", ReasonDocumentation},
		{"192.88.99.1", ReasonReserved},
		{"192.168.1.1", ReasonPrivate},
		{"198.18.0.1", ReasonBenchmark},
		{"198.19.255.255", ReasonBenchmark},
		{"198.51.100.7", ReasonDocumentation},
		{"203.0.113.9", ReasonDocumentation},
		{"224.0.0.1", ReasonMulticast},
		{"239.255.255.250", ReasonMulticast},
		{"240.0.0.1", ReasonReserved},
		{"255.255.255.254", ReasonReserved},
		{"255.255.255.255", ReasonBroadcast},

		// IPv6 special ranges.
		{"::", ReasonUnspecified},
		{"::1", ReasonLoopback},
		{"::2", ReasonReserved},           // outside 2000::/3
		{"::7f00:1", ReasonReserved},      // IPv4-compatible, deprecated
		{"fe80::1", ReasonLinkLocal},      //
		{"fe80::1%eth0", ReasonLinkLocal}, // zone ignored
		{"febf::1", ReasonLinkLocal},
		{"fec0::1", ReasonPrivate},
		{"fc00::1", ReasonPrivate},
		{"fd12:3456::1", ReasonPrivate},
		{"fd00:ec2::254", ReasonMetadata},
		{"ff02::1", ReasonMulticast},
		{"ff0e::1", ReasonMulticast},
		{"2001:db8::1", ReasonDocumentation},
		{"3fff::1", ReasonDocumentation},
		{"2001::1", ReasonReserved}, // Teredo
		{"2001:2::1", ReasonReserved},
		{"100::1", ReasonReserved},
		{"64:ff9b:1::1", ReasonReserved},
		{"4000::1", ReasonReserved},
		{"5f00::1", ReasonReserved},

		// IPv4-mapped IPv6: judged as IPv4.
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"::ffff:10.1.2.3", ReasonPrivate},
		{"::ffff:169.254.169.254", ReasonMetadata},
		{"::ffff:8.8.8.8", ""},

		// NAT64: judged as the embedded IPv4.
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b::127.0.0.1", ReasonLoopback},
		{"64:ff9b::a9fe:a9fe", ReasonMetadata}, // 169.254.169.254
		{"64:ff9b::192.168.0.1", ReasonPrivate},

		// 6to4: judged as the embedded IPv4.
		{"2002:0808:0808::1", ""},
		{"2002:7f00:0001::1", ReasonLoopback},
		{"2002:0a00:0001::1", ReasonPrivate},
	} {
		t.Run(tt.ip, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Classify(netip.MustParseAddr(tt.ip)))
		})
	}

	require.Equal(t, ReasonInvalid, Classify(netip.Addr{}))
}

func TestParseCIDRs(t *testing.T) {
	t.Parallel()

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		got, err := ParseCIDRs(" 127.0.0.1/32, ::1/128 ,,10.0.0.0/8, 192.168.1.7, fd00::1, ::ffff:172.16.0.0/108,")
		require.NoError(t, err)
		require.Equal(t, []netip.Prefix{
			netip.MustParsePrefix("127.0.0.1/32"),
			netip.MustParsePrefix("::1/128"),
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("192.168.1.7/32"),
			netip.MustParsePrefix("fd00::1/128"),
			netip.MustParsePrefix("172.16.0.0/12"),
		}, got)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		got, err := ParseCIDRs("")
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = ParseCIDRs(" , ")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	for _, tt := range []struct{ name, in, wantErr string }{
		{"Garbage", "localhost", `WEBHOOK_ALLOWED_CIDRS entry "localhost" is neither a CIDR prefix nor an IP address`},
		{"BadBits", "10.0.0.0/33", `WEBHOOK_ALLOWED_CIDRS entry "10.0.0.0/33" is not a CIDR prefix`},
		{"BadAddr", "10.0.0/8", `WEBHOOK_ALLOWED_CIDRS entry "10.0.0/8" is not a CIDR prefix`},
		{"HostBits", "10.0.0.1/8", `WEBHOOK_ALLOWED_CIDRS entry "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?`},
		{"SecondBad", "127.0.0.1/32,nope/8", `entry "nope/8"`},
		{"Zone", "fe80::1%eth0", "zones are not supported"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseCIDRs(tt.in)
			require.ErrorContains(t, err, tt.wantErr)
			_, err = ParseGuard(tt.in)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestGuardCheckIP(t *testing.T) {
	t.Parallel()

	t.Run("NoAllowList", func(t *testing.T) {
		t.Parallel()
		g := NewGuard(nil)
		require.NoError(t, g.CheckIP(netip.MustParseAddr("8.8.8.8")))

		err := g.CheckIP(netip.MustParseAddr("127.0.0.1"))
		require.ErrorIs(t, err, ErrBlocked)
		var be *BlockedError
		require.ErrorAs(t, err, &be)
		require.Equal(t, ReasonLoopback, be.Reason)
		require.EqualError(t, err, "destination 127.0.0.1 is not allowed: loopback address")
	})

	t.Run("NilGuardRefuses", func(t *testing.T) {
		t.Parallel()
		var g *Guard
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("10.0.0.1")), ErrBlocked)
		require.NoError(t, g.CheckIP(netip.MustParseAddr("8.8.8.8")))
		require.Empty(t, g.Allowed())
	})

	t.Run("TestAllowList", func(t *testing.T) {
		t.Parallel()
		g, err := ParseGuard("127.0.0.1/32,::1/128")
		require.NoError(t, err)
		require.NoError(t, g.CheckIP(netip.MustParseAddr("127.0.0.1")))
		require.NoError(t, g.CheckIP(netip.MustParseAddr("::1")))
		require.NoError(t, g.CheckIP(netip.MustParseAddr("::ffff:127.0.0.1")), "mapped form of an allowed v4")
		require.NoError(t, g.CheckIP(netip.MustParseAddr("8.8.8.8")), "public stays allowed")
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("127.0.0.2")), ErrBlocked)
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("10.0.0.1")), ErrBlocked)
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("169.254.169.254")), ErrBlocked)
	})

	t.Run("PrivateNetwork", func(t *testing.T) {
		t.Parallel()
		g := NewGuard([]netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1::/32")})
		require.NoError(t, g.CheckIP(netip.MustParseAddr("10.20.3.4")))
		require.NoError(t, g.CheckIP(netip.MustParseAddr("::ffff:10.20.3.4")))
		require.NoError(t, g.CheckIP(netip.MustParseAddr("64:ff9b::10.20.3.4")), "NAT64 to an allowed v4")
		require.NoError(t, g.CheckIP(netip.MustParseAddr("fd00:1::5")))
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("10.21.0.1")), ErrBlocked)
		require.ErrorIs(t, g.CheckIP(netip.MustParseAddr("fd00:2::5")), ErrBlocked)
	})

	t.Run("MetadataNeedsExactEntry", func(t *testing.T) {
		t.Parallel()
		broad := NewGuard([]netip.Prefix{
			netip.MustParsePrefix("0.0.0.0/0"),
			netip.MustParsePrefix("::/0"),
		})
		require.NoError(t, broad.CheckIP(netip.MustParseAddr("169.254.1.1")))
		require.NoError(t, broad.CheckIP(netip.MustParseAddr("10.0.0.1")))
		for _, ip := range []string{"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "64:ff9b::169.254.169.254"} {
			err := broad.CheckIP(netip.MustParseAddr(ip))
			var be *BlockedError
			require.ErrorAs(t, err, &be, ip)
			require.Equal(t, ReasonMetadata, be.Reason)
		}

		exact, err := ParseGuard("169.254.169.254, fd00:ec2::254/128")
		require.NoError(t, err)
		require.NoError(t, exact.CheckIP(netip.MustParseAddr("169.254.169.254")))
		require.NoError(t, exact.CheckIP(netip.MustParseAddr("fd00:ec2::254")))
	})

	t.Run("InvalidNeverAdmitted", func(t *testing.T) {
		t.Parallel()
		g := NewGuard([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")})
		require.ErrorIs(t, g.CheckIP(netip.Addr{}), ErrBlocked)
	})

	t.Run("AllowedIsACopy", func(t *testing.T) {
		t.Parallel()
		g, err := ParseGuard("127.0.0.1")
		require.NoError(t, err)
		a := g.Allowed()
		a[0] = netip.MustParsePrefix("10.0.0.0/8")
		require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, g.Allowed())
	})
}

func TestGuardControl(t *testing.T) {
	t.Parallel()

	g, err := ParseGuard("127.0.0.1/32")
	require.NoError(t, err)
	require.NoError(t, g.Control("tcp4", "127.0.0.1:443", nil))
	require.NoError(t, g.Control("tcp4", "8.8.8.8:443", nil))
	require.ErrorIs(t, g.Control("tcp6", "[::1]:443", nil), ErrBlocked)
	require.ErrorIs(t, g.Control("tcp6", "[fe80::1%eth0]:443", nil), ErrBlocked)
	require.ErrorIs(t, g.Control("tcp4", "10.0.0.1:80", nil), ErrBlocked)
	require.ErrorIs(t, g.Control("tcp", "not-an-address", nil), ErrBlocked)
}

// TestGuardDialer dials real loopback listeners through the guarded dialer:
// the refusal happens before connect, whatever name resolution said.
func TestGuardDialer(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	ctx := context.Background()

	refused := NewGuard(nil).Dialer(&net.Dialer{})
	_, err = refused.DialContext(ctx, "tcp", ln.Addr().String())
	require.ErrorIs(t, err, ErrBlocked)
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, ReasonLoopback, be.Reason)

	// "localhost" resolves to loopback: refused at dial time too.
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	_, err = refused.DialContext(ctx, "tcp4", net.JoinHostPort("localhost", port))
	require.ErrorIs(t, err, ErrBlocked)

	g, err := ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(t, err)
	conn, err := g.Dialer(nil).DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

// fakeResolver answers from a map; names not in it do not exist.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "servfail.example" {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	ips, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, netip.MustParseAddr(ip))
	}
	return addrs, nil
}

func TestGuardCheckURL(t *testing.T) {
	t.Parallel()

	resolver := fakeResolver{
		"hooks.example.com":   {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
		"hooks.example.com.":  {"93.184.216.34"},
		"internal.example":    {"10.1.2.3"},
		"mixed.example":       {"93.184.216.34", "192.168.0.10"},
		"localhost":           {"127.0.0.1", "::1"},
		"metadata.example":    {"169.254.169.254"},
		"empty.example":       {},
		"under_score.example": {"93.184.216.34"},
	}
	g, err := ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(t, err)
	ctx := context.Background()

	for _, ok := range []string{
		"https://hooks.example.com/webhooks",
		"http://hooks.example.com:8080/a?b=c#frag",
		"HTTPS://hooks.example.com",
		"https://hooks.example.com./x",
		"https://under_score.example/",
		"https://93.184.216.34/hook",
		"https://[2606:2800:220:1:248:1893:25c8:1946]:8443/hook",
		"http://127.0.0.1:9999/hook", // allow-listed for tests
		"http://[::1]:9999/hook",
		"http://localhost:9999/hook",
		// Names that do not resolve (yet) are saved: the dial-time guard
		// judges the addresses they resolve to at delivery.
		"https://nope.example/",
		"https://servfail.example/",
		"https://empty.example/",
	} {
		t.Run("OK "+ok, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, g.CheckURL(ctx, ok, resolver))
		})
	}

	for _, tt := range []struct {
		name, url, wantMsg string
		cause              error
	}{
		{"Empty", "", "must not be empty", nil},
		{"Spaces", " https://hooks.example.com", "must not start or end with spaces", nil},
		{"Relative", "/webhooks", "must be an absolute URL such as https://example.com/webhooks", nil},
		{"NoScheme", "hooks.example.com/webhooks", "must be an absolute URL", nil},
		{"Opaque", "https:hooks.example.com", "must be an absolute URL", nil},
		{"NoHost", "https:///path", "must be an absolute URL", nil},
		{"Scheme", "ftp://hooks.example.com/", `must use http or https, not "ftp"`, nil},
		{"SchemeJS", "javascript://hooks.example.com/", `must use http or https, not "javascript"`, nil},
		{"Userinfo", "https://user:pass@hooks.example.com/", "must not contain a user name or password", nil},
		{"UserOnly", "https://user@hooks.example.com/", "must not contain a user name or password", nil},
		{"BadParse", "https://hooks.example.com:port/", "is not a valid URL", nil},
		{"PortZero", "https://hooks.example.com:0/", `has an invalid port "0"`, nil},
		{"PortBig", "https://hooks.example.com:65536/", `has an invalid port "65536"`, nil},
		{"EmptyPort", "https://hooks.example.com:/", "has an empty port", nil},
		{"Loopback", "http://127.0.0.2/", "points to 127.0.0.2, a loopback address; webhooks go only to addresses reachable from the internet", ErrBlocked},
		{"Private", "http://10.0.0.1/", "points to 10.0.0.1, a private network address", ErrBlocked},
		{"Metadata", "http://169.254.169.254/latest/meta-data/", "points to 169.254.169.254, a cloud metadata service address", ErrBlocked},
		{"MappedV6", "http://[::ffff:10.0.0.1]/", "points to ::ffff:10.0.0.1, a private network address", ErrBlocked},
		{"V6ULA", "http://[fd00::1]/", "a private network address", ErrBlocked},
		{"V6Zone", "http://[fe80::1%25eth0]/", "must not use an IPv6 zone", nil},
		{"ResolvesPrivate", "https://internal.example/hook", `host "internal.example" resolves to 10.1.2.3, a private network address`, ErrBlocked},
		{"OneOfManyPrivate", "https://mixed.example/hook", `host "mixed.example" resolves to 192.168.0.10`, ErrBlocked},
		{"ResolvesMetadata", "https://metadata.example/", "a cloud metadata service address", ErrBlocked},
		{"DecimalIP", "http://2130706433/", "neither a valid IP address nor a DNS name", nil},
		{"HexIP", "http://0x7f000001/", "neither a valid IP address nor a DNS name", nil},
		{"ShortIP", "http://127.1/", "neither a valid IP address nor a DNS name", nil},
		{"OctalIP", "http://0177.0.0.1/", "neither a valid IP address nor a DNS name", nil},
		{"BadLabel", "http://a..example/", "has an invalid host name", nil},
		{"BadChar", "http://exa!mple.com/", `has an invalid host name "exa!mple.com"`, nil},
		{"Unicode", "http://bücher.example/", "use its punycode (xn--) form", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := g.CheckURL(ctx, tt.url, resolver)
			var ue *URLError
			require.ErrorAs(t, err, &ue)
			require.Contains(t, ue.Message, tt.wantMsg)
			require.Equal(t, tt.url, ue.URL)
			if tt.cause == ErrBlocked {
				require.NotContains(t, ue.Message, "WEBHOOK_ALLOWED_CIDRS", "the customer is told what to do, not a server setting")
				require.Contains(t, ue.OperatorHint, "WEBHOOK_ALLOWED_CIDRS=", "the operator's log names the setting that admits it")
			}
			require.Contains(t, err.Error(), "invalid webhook URL: "+ue.Message)
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
			}
		})
	}

	t.Run("TooLong", func(t *testing.T) {
		t.Parallel()
		long := "https://hooks.example.com/" + string(make([]byte, 2100))
		var ue *URLError
		require.ErrorAs(t, g.CheckURL(ctx, long, resolver), &ue)
		require.Equal(t, "must be at most 2048 characters", ue.Message)
	})

	t.Run("WithoutAllowList", func(t *testing.T) {
		t.Parallel()
		err := NewGuard(nil).CheckURL(ctx, "http://localhost:9999/hook", resolver)
		require.ErrorIs(t, err, ErrBlocked)
		var ue *URLError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, `host "localhost" resolves to 127.0.0.1, a loopback address; webhooks go only to addresses reachable from the internet: use a public host name for your endpoint (or a tunnel to it)`, ue.Message)
		require.Equal(t, `the server's WEBHOOK_ALLOWED_CIDRS setting admits such an address (for example WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32)`, ue.OperatorHint)
	})
}
