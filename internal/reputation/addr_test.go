package reputation

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// LookupAddr asks every healthy IP list about one address through the
// shared cache: a listing with its reason, the unhealthy list named as
// unchecked, the domain list not asked, and a second lookup answered from
// the cache without a query. It stores no listing.
func TestLookupAddr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, srv := newChecker(t)
	now := time.Now().UTC()

	res, err := c.LookupAddr(ctx, tx, netip.MustParseAddr("192.0.2.10"), now)
	require.NoError(t, err)
	require.Equal(t, 1, res.Checked)
	require.Equal(t, []string{"sick.test"}, res.Unchecked)
	require.Len(t, res.Listings, 1)
	l := res.Listings[0]
	require.Equal(t, "bl.test", l.Zone)
	require.False(t, l.Informational)
	require.Contains(t, l.Reason, "listed for spam")
	require.Equal(t, "127.0.0.2", l.Detail())
	asked := srv.QueriesFor(listedName)
	require.Positive(t, asked)
	var status string
	require.NoError(t, tx.QueryRow(ctx, `SELECT status FROM blocklist_lookups WHERE zone = 'bl.test' AND target = '192.0.2.10'`).Scan(&status))
	require.Equal(t, "listed", status, "the answer is in the cache the domains' checks read")
	var listings int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM reputation_listings`).Scan(&listings))
	require.Zero(t, listings, "a received message's sender is nobody's watched target")

	again, err := c.LookupAddr(ctx, tx, netip.MustParseAddr("::ffff:192.0.2.10"), now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, res, again)
	require.Equal(t, asked, srv.QueriesFor(listedName), "answered from the cache")

	// An address not listed: checked, nothing listed.
	res, err = c.LookupAddr(ctx, tx, netip.MustParseAddr("192.0.2.99"), now)
	require.NoError(t, err)
	require.Equal(t, 1, res.Checked)
	require.Empty(t, res.Listings)

	// An answer that is an error code decides nothing: the list is unchecked.
	res, err = c.LookupAddr(ctx, tx, netip.MustParseAddr("192.0.2.11"), now)
	require.NoError(t, err)
	require.Zero(t, res.Checked)
	require.Equal(t, []string{"bl.test", "sick.test"}, res.Unchecked)
}

// A catalog list's policy code (Spamhaus PBL) is an informational listing,
// described by its code and name.
func TestLookupAddrPolicyListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	srv := dnstest.Start(t, `
2.0.0.127.zen.spamhaus.org.   300 A 127.0.0.2
20.2.0.192.zen.spamhaus.org.  300 A 127.0.0.10
21.2.0.192.zen.spamhaus.org.  300 A 127.0.0.4
`)
	lists, err := blocklist.ParseZones("zen.spamhaus.org")
	require.NoError(t, err)
	c := &Checker{Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second), Lists: lists}
	now := time.Now().UTC()

	res, err := c.LookupAddr(ctx, tx, netip.MustParseAddr("192.0.2.20"), now)
	require.NoError(t, err)
	require.Len(t, res.Listings, 1)
	require.True(t, res.Listings[0].Informational)
	require.Equal(t, "127.0.0.10 PBL", res.Listings[0].Detail())

	res, err = c.LookupAddr(ctx, tx, netip.MustParseAddr("192.0.2.21"), now)
	require.NoError(t, err)
	require.Len(t, res.Listings, 1)
	require.False(t, res.Listings[0].Informational)
	require.Equal(t, "127.0.0.4 XBL", res.Listings[0].Detail())
}
