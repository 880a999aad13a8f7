package blocklist

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// testZone serves the catalog's own zones on loopback: the client never
// leaves the machine, so Spamhaus's real names can carry test data.
const testZone = `
; ZEN health entries (RFC 5782 section 5) and listings.
2.0.0.127.zen.spamhaus.org.    300 A   127.0.0.2
2.0.0.127.zen.spamhaus.org.    300 TXT "test entry"
10.2.0.192.zen.spamhaus.org.   600 A   127.0.0.2
10.2.0.192.zen.spamhaus.org.   120 A   127.0.0.11
10.2.0.192.zen.spamhaus.org.   300 TXT "https://check.spamhaus.org/sbl/query/SBL1 " "spam source"
11.2.0.192.zen.spamhaus.org.   300 A   127.0.0.10
12.2.0.192.zen.spamhaus.org.   300 A   127.255.255.254
13.2.0.192.zen.spamhaus.org.   300 A   127.0.0.2
13.2.0.192.zen.spamhaus.org.   300 A   127.255.255.254
14.2.0.192.zen.spamhaus.org.   300 A   203.0.113.7
15.2.0.192.zen.spamhaus.org.   300 A   127.0.0.8
16.2.0.192.zen.spamhaus.org.   300 A   127.0.0.2
16.2.0.192.zen.spamhaus.org.   300 TXT "reason the resolver will not deliver"
17.2.0.192.zen.spamhaus.org.   300 A   127.0.1.2
18.2.0.192.zen.spamhaus.org.   300 TXT "a TXT record alone is no listing"
20.2.0.192.zen.spamhaus.org.   300 A   127.0.0.2
21.2.0.192.zen.spamhaus.org.   300 A   127.0.0.2
22.2.0.192.zen.spamhaus.org.   300 A   127.0.0.2
1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.zen.spamhaus.org. 300 A 127.0.0.4
1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.zen.spamhaus.org. 300 TXT "XBL listing"

; DBL.
dbltest.com.dbl.spamhaus.org.      300 A   127.0.1.2
bad.example.dbl.spamhaus.org.      900 A   127.0.1.4
bad.example.dbl.spamhaus.org.      900 TXT "phishing domain"
abused.example.dbl.spamhaus.org.   300 A   127.0.1.102
refused.example.dbl.spamhaus.org.  300 A   127.0.1.255

; A generic list from BLOCKLIST_ZONES.
2.0.0.127.bl.test.             300 A   127.0.0.2
10.2.0.192.bl.test.            300 A   127.0.0.3
11.2.0.192.bl.test.            300 A   127.0.1.2
12.2.0.192.bl.test.            300 A   127.255.255.1

; Unhealthy lists.
*.everything.test.             300 A   127.0.0.2
*.refusing.test.               300 A   127.255.255.254
2.0.0.127.halfrefusing.test.   300 A   127.255.255.254

; An informational list.
10.2.0.192.dnsbl-1.uceprotect.net. 300 A 127.0.0.2
1.0.0.127.nowhere.test.        300 TXT "keeps the zone's name existing"
test.dom.test.                 300 A   127.0.0.2
`

func startServer(t *testing.T) (*dnstest.Server, *dnscheck.Client) {
	t.Helper()
	srv := dnstest.Start(t, testZone)
	return srv, dnscheck.NewClient(srv.Addr(), 100*time.Millisecond)
}

func catalogList(t *testing.T, zone string) List {
	t.Helper()
	l, ok := catalogEntry(zone)
	require.True(t, ok, zone)
	return l
}

func lookupIP(t *testing.T, r Resolver, l List, ip string) Result {
	t.Helper()
	res, err := LookupIP(context.Background(), r, l, netip.MustParseAddr(ip))
	require.NoError(t, err)
	return res
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestLookupIP(t *testing.T) {
	t.Parallel()
	srv, client := startServer(t)
	zen := catalogList(t, "zen.spamhaus.org")

	t.Run("listed with codes, reason and TTL", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.10")
		require.Equal(t, Listed, res.Status)
		require.NoError(t, res.Err)
		require.Equal(t, "10.2.0.192.zen.spamhaus.org", res.Name)
		require.ElementsMatch(t, addrs("127.0.0.2", "127.0.0.11"), res.Answers)
		names := map[string]bool{}
		for _, c := range res.Codes {
			names[c.Name] = c.Informational
		}
		require.Equal(t, map[string]bool{"SBL": false, "PBL": true}, names)
		require.Equal(t, "https://check.spamhaus.org/sbl/query/SBL1 spam source", res.Reason, "character strings of one TXT record are joined")
		require.Equal(t, 120*time.Second, res.TTL, "the smallest TTL of the answer")
		require.False(t, res.Informational(zen), "SBL is not informational even next to PBL")
	})

	t.Run("PBL alone is informational", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.11")
		require.Equal(t, Listed, res.Status)
		require.Len(t, res.Codes, 1)
		require.Equal(t, "PBL", res.Codes[0].Name)
		require.True(t, res.Informational(zen))
		require.Empty(t, res.Reason, "no TXT published")
	})

	t.Run("not listed is NXDOMAIN and sends no TXT query", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.99")
		require.Equal(t, NotListed, res.Status)
		require.Empty(t, res.Codes)
		require.Equal(t, int64(1), srv.QueriesFor("99.2.0.192.zen.spamhaus.org"))
	})

	t.Run("NODATA is not listed", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.18")
		require.Equal(t, NotListed, res.Status)
	})

	t.Run("error code 127.255.255.254 is a list error", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.12")
		require.Equal(t, ListError, res.Status)
		require.Empty(t, res.Codes)
		require.ErrorContains(t, res.Err, "127.255.255.254")
		require.Equal(t, int64(1), srv.QueriesFor("12.2.0.192.zen.spamhaus.org"), "no TXT query for an error")
	})

	t.Run("an error code next to a listing code spoils the answer", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.13")
		require.Equal(t, ListError, res.Status)
		require.Empty(t, res.Codes)
	})

	t.Run("an answer outside 127/8 is a list error", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.14")
		require.Equal(t, ListError, res.Status)
		require.ErrorContains(t, res.Err, "outside 127.0.0.0/8")
	})

	t.Run("an answer in 127/8 outside the listing range is a list error", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.17")
		require.Equal(t, ListError, res.Status)
	})

	t.Run("an undocumented code is still a listing", func(t *testing.T) {
		res := lookupIP(t, client, zen, "192.0.2.15")
		require.Equal(t, Listed, res.Status)
		require.Len(t, res.Codes, 1)
		require.Equal(t, netip.MustParseAddr("127.0.0.8"), res.Codes[0].Addr)
		require.Empty(t, res.Codes[0].Name)
		require.Contains(t, res.Codes[0].Meaning, "does not document")
	})

	t.Run("a failing TXT lookup does not undo the listing", func(t *testing.T) {
		res := lookupIP(t, failTXT{client}, zen, "192.0.2.16")
		require.Equal(t, Listed, res.Status)
		require.Empty(t, res.Reason)
		require.Equal(t, "SBL", res.Codes[0].Name)
	})

	t.Run("IPv6 nibbles", func(t *testing.T) {
		res := lookupIP(t, client, zen, "2001:db8::1")
		require.Equal(t, Listed, res.Status)
		require.Equal(t, "XBL", res.Codes[0].Name)
		require.Equal(t, "XBL listing", res.Reason)
	})

	t.Run("IPv4-mapped IPv6 is looked up as IPv4", func(t *testing.T) {
		res := lookupIP(t, client, zen, "::ffff:192.0.2.10")
		require.Equal(t, Listed, res.Status)
		require.Equal(t, "10.2.0.192.zen.spamhaus.org", res.Name)
	})

	t.Run("SERVFAIL is temporary", func(t *testing.T) {
		srv.ServFail("20.2.0.192.zen.spamhaus.org")
		res := lookupIP(t, client, zen, "192.0.2.20")
		require.Equal(t, Temporary, res.Status)
		require.Error(t, res.Err)
		require.True(t, dnscheck.IsTemporary(res.Err))
		require.Empty(t, res.Codes)
	})

	t.Run("an answer slower than the timeout is temporary", func(t *testing.T) {
		srv.Delay("21.2.0.192.zen.spamhaus.org", time.Second)
		res := lookupIP(t, client, zen, "192.0.2.21")
		require.Equal(t, Temporary, res.Status)
		var dnsErr *net.DNSError
		require.ErrorAs(t, res.Err, &dnsErr)
		require.True(t, dnsErr.IsTimeout)
	})

	t.Run("a dropped query is temporary", func(t *testing.T) {
		srv.Drop("22.2.0.192.zen.spamhaus.org")
		res := lookupIP(t, client, zen, "192.0.2.22")
		require.Equal(t, Temporary, res.Status)
		require.Positive(t, srv.QueriesFor("22.2.0.192.zen.spamhaus.org"))
	})

	t.Run("generic list from BLOCKLIST_ZONES", func(t *testing.T) {
		lists, err := ParseZones("bl.test")
		require.NoError(t, err)
		bl := lists[0]
		res := lookupIP(t, client, bl, "192.0.2.10")
		require.Equal(t, Listed, res.Status, "any 127.0.0.x is a listing")
		require.Equal(t, netip.MustParseAddr("127.0.0.3"), res.Codes[0].Addr)
		require.Equal(t, ListError, lookupIP(t, client, bl, "192.0.2.11").Status, "127.0.1.x is not a listing code of a generic list")
		res = lookupIP(t, client, bl, "192.0.2.12")
		require.Equal(t, ListError, res.Status, "127.255.255.x is an error on every list")
		require.ErrorContains(t, res.Err, "error code")
	})

	t.Run("a listing on an informational list is informational", func(t *testing.T) {
		uce := catalogList(t, "dnsbl-1.uceprotect.net")
		res := lookupIP(t, client, uce, "192.0.2.10")
		require.Equal(t, Listed, res.Status)
		require.False(t, res.Codes[0].Informational)
		require.True(t, res.Informational(uce))
		require.False(t, Result{Status: ListError}.Informational(uce), "only listings are informational")
	})

	t.Run("Lookup dispatches on the list's kind", func(t *testing.T) {
		res, err := Lookup(context.Background(), client, zen, "2001:db8::1")
		require.NoError(t, err)
		require.Equal(t, Listed, res.Status)
		require.Equal(t, "XBL", res.Codes[0].Name)
		res, err = Lookup(context.Background(), client, catalogList(t, "dbl.spamhaus.org"), "bad.example")
		require.NoError(t, err)
		require.Equal(t, "DBL phish", res.Codes[0].Name)
		_, err = Lookup(context.Background(), client, zen, "bad.example")
		require.ErrorIs(t, err, ErrInvalid)
	})

	t.Run("caller mistakes are errors, not results", func(t *testing.T) {
		_, err := LookupIP(context.Background(), client, zen, netip.Addr{})
		require.ErrorIs(t, err, ErrInvalid)
		_, err = LookupIP(context.Background(), client, catalogList(t, "dbl.spamhaus.org"), netip.MustParseAddr("192.0.2.1"))
		require.ErrorIs(t, err, ErrInvalid)
		_, err = LookupDomain(context.Background(), client, zen, "example.com")
		require.ErrorIs(t, err, ErrInvalid)
	})
}

func TestLookupDomain(t *testing.T) {
	t.Parallel()
	srv, client := startServer(t)
	dbl := catalogList(t, "dbl.spamhaus.org")
	lookup := func(domain string) Result {
		t.Helper()
		res, err := LookupDomain(context.Background(), client, dbl, domain)
		require.NoError(t, err)
		return res
	}

	res := lookup("Bad.Example.")
	require.Equal(t, Listed, res.Status)
	require.Equal(t, "bad.example.dbl.spamhaus.org", res.Name)
	require.Equal(t, "DBL phish", res.Codes[0].Name)
	require.Equal(t, "phishing domain", res.Reason)
	require.Equal(t, 900*time.Second, res.TTL)

	res = lookup("abused.example")
	require.Equal(t, Listed, res.Status)
	require.Equal(t, "DBL abused legit spam", res.Codes[0].Name)

	res = lookup("refused.example")
	require.Equal(t, ListError, res.Status, "127.0.1.255 is Spamhaus's refusal, never a listing")
	require.Empty(t, res.Codes)
	require.ErrorContains(t, res.Err, "127.0.1.255")

	res = lookup("good.example")
	require.Equal(t, NotListed, res.Status)
	require.Equal(t, int64(1), srv.QueriesFor("good.example.dbl.spamhaus.org"))

	_, err := LookupDomain(context.Background(), client, dbl, "192.0.2.1")
	require.ErrorIs(t, err, ErrInvalid, "domain lists are not queried with IP addresses")
}

func TestHealth(t *testing.T) {
	t.Parallel()
	srv, client := startServer(t)
	ctx := context.Background()
	parse := func(s string) List {
		t.Helper()
		lists, err := ParseZones(s)
		require.NoError(t, err)
		return lists[0]
	}

	h := Health(ctx, client, catalogList(t, "zen.spamhaus.org"))
	require.Equal(t, Healthy, h.Status, h.Reason)
	require.Equal(t, Listed, h.Positive.Status)
	require.Equal(t, NotListed, h.Negative.Status)
	require.Equal(t, "2.0.0.127.zen.spamhaus.org", h.Positive.Name)
	require.Equal(t, "1.0.0.127.zen.spamhaus.org", h.Negative.Name)

	h = Health(ctx, client, catalogList(t, "dbl.spamhaus.org"))
	require.Equal(t, Healthy, h.Status, h.Reason)
	require.Equal(t, "dbltest.com.dbl.spamhaus.org", h.Positive.Name)
	require.Equal(t, "invalid.dbl.spamhaus.org", h.Negative.Name)

	h = Health(ctx, client, parse("dom.test=domain"))
	require.Equal(t, Healthy, h.Status, h.Reason)
	require.Equal(t, "test.dom.test", h.Positive.Name, "RFC 5782 section 5 test name")

	h = Health(ctx, client, parse("everything.test"))
	require.Equal(t, Unhealthy, h.Status, "127.0.0.1 is listed")
	require.Contains(t, h.Reason, "1.0.0.127.everything.test")

	h = Health(ctx, client, parse("nowhere.test"))
	require.Equal(t, Unhealthy, h.Status, "127.0.0.2 is missing")
	require.Contains(t, h.Reason, "does not list its test entry")

	h = Health(ctx, client, parse("refusing.test"))
	require.Equal(t, Unhealthy, h.Status, "answers with an error code")
	require.Contains(t, h.Reason, "127.255.255.254")

	h = Health(ctx, client, parse("halfrefusing.test"))
	require.Equal(t, Unhealthy, h.Status, "answers its test entry with an error code")
	require.Equal(t, NotListed, h.Negative.Status)
	require.Contains(t, h.Reason, "127.255.255.254")

	srv.ServFail("failing.test")
	h = Health(ctx, client, parse("failing.test"))
	require.Equal(t, HealthUnknown, h.Status, "no answer says nothing about health")
	require.NotEmpty(t, h.Reason)
}

// failTXT passes A queries to the server and fails TXT queries, which the
// test server can only fail for all types of a name at once.
type failTXT struct{ r Resolver }

func (f failTXT) Query(ctx context.Context, name string, qtype uint16) (*dnscheck.Answer, error) {
	if qtype == dns.TypeTXT {
		return nil, &net.DNSError{Err: "resolver answered SERVFAIL", Name: name, IsTemporary: true}
	}
	return f.r.Query(ctx, name, qtype)
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a b c", sanitize("a\x00b\nc"))
	require.Equal(t, "bad utf8", sanitize("bad\xffutf8"))
	long := sanitize(strings.Repeat("é", MaxReasonLength))
	require.LessOrEqual(t, len(long), MaxReasonLength)
	require.True(t, strings.HasPrefix(long, "éé"))
	require.NotContains(t, long, "\uFFFD")
}
