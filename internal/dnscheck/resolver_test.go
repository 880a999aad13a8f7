package dnscheck

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnstest"
)

func TestClient(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	srv := dnstest.Start(t, `
$ORIGIN r.test.
@          TXT  "v=spf1 " "-all"
@          MX   20 mx2
@          MX   10 mx1
mx1        A    192.0.2.1
mx1        AAAA 2001:db8::1
alias      CNAME mx1
*.wild     TXT  "wildcard"
deep.empty.nonterminal TXT "x"
big        TXT  "`+long+`" "`+long+`"
big        TXT  "`+long+`1"
big        TXT  "`+long+`2"
big        TXT  "`+long+`3"
`)
	srv.Truncate("big.r.test")
	srv.Authenticate("r.test")
	srv.ServFail("fail.r.test")
	srv.Drop("drop.r.test")
	c := NewClient(srv.Addr(), 100*time.Millisecond)
	ctx := context.Background()

	txts, err := c.LookupTXT(ctx, "r.test")
	require.NoError(t, err)
	require.Equal(t, []string{"v=spf1 -all"}, txts, "strings of one record are joined")

	mxs, err := c.LookupMX(ctx, "r.test")
	require.NoError(t, err)
	require.Equal(t, []*net.MX{{Host: "mx1.r.test", Pref: 10}, {Host: "mx2.r.test", Pref: 20}}, mxs)

	addrs, err := c.LookupNetIP(ctx, "ip", "mx1.r.test")
	require.NoError(t, err)
	require.ElementsMatch(t, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}, addrs)

	a, err := c.Query(ctx, "alias.r.test", dns.TypeA)
	require.NoError(t, err)
	require.Equal(t, []string{"mx1.r.test"}, a.CNAMEs)
	require.Len(t, a.Records, 1)
	require.True(t, a.Authenticated)

	txts, err = c.LookupTXT(ctx, "anything.wild.r.test")
	require.NoError(t, err)
	require.Equal(t, []string{"wildcard"}, txts)

	// Truncated over UDP: the client retries over TCP.
	txts, err = c.LookupTXT(ctx, "big.r.test")
	require.NoError(t, err)
	require.Len(t, txts, 4)

	for name, check := range map[string]func(*net.DNSError) bool{
		"nx.r.test":          func(e *net.DNSError) bool { return e.IsNotFound && strings.Contains(e.Err, "NXDOMAIN") },
		"mx1.r.test":         func(e *net.DNSError) bool { return e.IsNotFound && strings.Contains(e.Err, "NODATA") },
		"nonterminal.r.test": func(e *net.DNSError) bool { return e.IsNotFound && strings.Contains(e.Err, "NODATA") },
		"fail.r.test": func(e *net.DNSError) bool {
			return !e.IsNotFound && e.IsTemporary && strings.Contains(e.Err, "SERVFAIL")
		},
		"drop.r.test":              func(e *net.DNSError) bool { return !e.IsNotFound && e.IsTimeout },
		"below.fail.r.test":        func(e *net.DNSError) bool { return e.IsTemporary },
		"empty.nonterminal.r.test": func(e *net.DNSError) bool { return e.IsNotFound },
	} {
		_, err := c.LookupTXT(ctx, name)
		var dnsErr *net.DNSError
		require.ErrorAs(t, err, &dnsErr, name)
		require.True(t, check(dnsErr), "%s: %+v", name, dnsErr)
		require.Equal(t, !dnsErr.IsNotFound, IsTemporary(err), name)
	}

	// Records change at runtime.
	require.NoError(t, srv.Set(`r.test. TXT "v=spf1 ~all"`))
	txts, err = c.LookupTXT(ctx, "r.test")
	require.NoError(t, err)
	require.Equal(t, []string{"v=spf1 ~all"}, txts)
	srv.Remove("r.test", dns.TypeTXT)
	_, err = c.LookupTXT(ctx, "r.test")
	require.True(t, IsNotFound(err))

	require.Positive(t, srv.Queries())
	require.EqualValues(t, 2, srv.QueriesFor("big.r.test"), "one UDP and one TCP query")
}

func TestCacheSharesQueries(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `c.test. TXT "hello"`)
	srv.ServFail("fail.c.test")
	// The server answers at once; the default query timeout keeps a loaded
	// machine from turning one slow answer into a retried (second) query.
	cache := newCache(NewClient(srv.Addr(), 0))
	for range 3 {
		txts, err := cache.LookupTXT(context.Background(), "c.test")
		require.NoError(t, err)
		require.Equal(t, []string{"hello"}, txts)
		_, err = cache.LookupTXT(context.Background(), "fail.c.test")
		require.True(t, IsTemporary(err))
	}
	require.EqualValues(t, 1, srv.QueriesFor("c.test"))
	require.EqualValues(t, 3, srv.QueriesFor("fail.c.test"), "temporary failures are not cached")
}

func TestResolverAddress(t *testing.T) {
	t.Parallel()
	addr, err := ResolverAddress("127.0.0.1:5353")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:5353", addr)
	require.Equal(t, "192.0.2.53:53", NewClient("192.0.2.53", 0).Server)
	require.Equal(t, "[2001:db8::53]:53", NewClient("2001:db8::53", 0).Server)
}
