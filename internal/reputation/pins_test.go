package reputation

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func targetsOf(t *testing.T, check Status) map[string]Watched {
	t.Helper()
	out := map[string]Watched{}
	for _, w := range check.Targets {
		out[w.Target] = w
	}
	return out
}

// TestPinnedRangeIsWatched: a pinned /30 yields its four addresses as
// targets of origin "pinned", each looked up on the IP list; the listed
// one (192.0.2.10) raises blocklist_listed. Removing the pin drops the
// addresses and ends the listing without an event.
func TestPinnedRangeIsWatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, srv := newChecker(t)
	now := time.Now().UTC()
	d := testfactory.AccountDomain(t, tx, "pinned.example")

	pin, err := AddPin(ctx, tx, nil, d.AccountID, d.ID, d.Name, "192.0.2.9/30", " office relays ", now)
	require.NoError(t, err)
	require.Equal(t, Pin{CIDR: "192.0.2.8/30", Note: "office relays", Addresses: 4, CreatedAt: pin.CreatedAt}, pin,
		"stored masked, the note trimmed")

	out, err := c.Check(ctx, tx, d.ID, now)
	require.NoError(t, err)
	require.Equal(t, 5, out.Targets, "the four pinned addresses and the domain")
	for _, name := range []string{"8.2.0.192.bl.test.", "9.2.0.192.bl.test.", listedName, errorName} {
		require.Positive(t, srv.QueriesFor(name), "%s looked up", name)
	}
	require.Equal(t, 1, out.Listed)
	listed := eventsOf(t, tx, d.AccountID, events.TypeBlocklistListed)
	require.Len(t, listed, 1)
	require.Equal(t, "192.0.2.10", listed[0].Payload["target"])
	require.Equal(t, "warning", listed[0].Severity, "no reported mail: below the critical share")

	st, err := Read(ctx, tx, c.Lists, d.AccountID, d.ID)
	require.NoError(t, err)
	require.Len(t, st.Pins, 1)
	byTarget := targetsOf(t, st)
	for _, ip := range []string{"192.0.2.8", "192.0.2.9", "192.0.2.10", "192.0.2.11"} {
		require.Equal(t, OriginPinned, byTarget[ip].Origin, ip)
		require.Equal(t, KindIP, byTarget[ip].Kind, ip)
	}
	require.Len(t, byTarget["192.0.2.10"].Listings, 1)

	// The pin goes: so do its addresses, and the listing ends quietly.
	require.ErrorIs(t, DeletePin(ctx, tx, d.AccountID, d.ID, d.Name, "192.0.2.0/30", now), ErrPinNotFound)
	require.NoError(t, DeletePin(ctx, tx, d.AccountID, d.ID, d.Name, "192.0.2.8/30", now.Add(time.Minute)))
	st, err = Read(ctx, tx, c.Lists, d.AccountID, d.ID)
	require.NoError(t, err)
	require.Empty(t, st.Pins)
	require.Len(t, st.Targets, 1, "only the domain is left")
	var delisted *time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT delisted_at FROM reputation_listings WHERE domain_id = $1 AND target = '192.0.2.10'`,
		d.ID).Scan(&delisted))
	require.NotNil(t, delisted, "the listing is ended, its row kept as history")
	require.Empty(t, eventsOf(t, tx, d.AccountID, events.TypeBlocklistDelisted), "a removed pin is no delisting")
}

// TestPinnedSourceKeepsItsShare: a pinned address that also carries the
// domain's mail keeps origin "pinned" with its share; once the pin goes, the
// reports keep it watched (origin "report") and its listing stands.
func TestPinnedSourceKeepsItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, _ := newChecker(t)
	now := time.Now().UTC()
	d := testfactory.AccountDomain(t, tx, "pinned-source.example")
	seedReports(t, tx, d.ID, now)
	_, err := AddPin(ctx, tx, nil, d.AccountID, d.ID, d.Name, "192.0.2.10", "", now)
	require.NoError(t, err)

	out, err := c.Check(ctx, tx, d.ID, now)
	require.NoError(t, err)
	require.Equal(t, 5, out.Targets, "the pinned source counts once")
	require.InDelta(t, 0.4, out.ListedShare, 1e-9, "a pinned source's share counts toward the listed share")
	st, err := Read(ctx, tx, c.Lists, d.AccountID, d.ID)
	require.NoError(t, err)
	w := targetsOf(t, st)["192.0.2.10"]
	require.Equal(t, OriginPinned, w.Origin)
	require.Equal(t, int64(40), w.Messages)
	require.InDelta(t, 0.4, w.Share, 1e-9)

	require.NoError(t, DeletePin(ctx, tx, d.AccountID, d.ID, d.Name, "192.0.2.10/32", now))
	st, err = Read(ctx, tx, c.Lists, d.AccountID, d.ID)
	require.NoError(t, err)
	w = targetsOf(t, st)["192.0.2.10"]
	require.Equal(t, OriginReport, w.Origin)
	require.Len(t, w.Listings, 1, "still a source, still listed")
}

func TestParsePin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.0/24":    "192.0.2.0/24",
		"192.0.2.77/30":   "192.0.2.76/30",
		" 192.0.2.1 ":     "192.0.2.1/32",
		"2001:DB8::/120":  "2001:db8::/120",
		"2001:db8::5/126": "2001:db8::4/126",
		"2001:db8::1":     "2001:db8::1/128",
	} {
		p, err := ParsePin(in)
		require.NoError(t, err, in)
		require.Equal(t, want, p.String(), in)
	}
	for in, msg := range map[string]string{
		"":                      "empty",
		"192.0.2.0/23":          "pin a /24 or a longer prefix",
		"10.0.0.0/8":            "more than 256 addresses",
		"2001:db8::/119":        "pin a /120 or a longer prefix",
		"::ffff:192.0.2.0/120":  "IPv4-mapped",
		"fe80::1%eth0":          "not an IP address",
		"example.com":           "not an IP address",
		"192.0.2.0/33":          "not an IP prefix",
		strings.Repeat("1", 65): "longer than 64",
	} {
		_, err := ParsePin(in)
		require.ErrorIs(t, err, ErrPinInvalid, in)
		require.Contains(t, err.Error(), msg, in)
	}
}

// TestPinBounds: at most MaxPins pins and MaxPinnedAddresses addresses a
// domain, no range twice or overlapping, a note of at most MaxPinNote
// characters; a refused pin stores nothing.
func TestPinBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := time.Now().UTC()
	d := testfactory.AccountDomain(t, tx, "pin-bounds.example")
	add := func(cidr string) error {
		_, err := AddPin(ctx, tx, nil, d.AccountID, d.ID, d.Name, cidr, "", now)
		return err
	}
	for i := range 4 {
		require.NoError(t, add(fmt.Sprintf("198.51.%d.0/24", i)))
	}
	err := add("203.0.113.0/31")
	require.ErrorIs(t, err, ErrPinInvalid, "1,024 addresses pinned already")
	require.Contains(t, err.Error(), "would bring the domain's pinned addresses to 1026, more than 1024")
	err = add("198.51.1.128/25")
	require.ErrorIs(t, err, ErrPinConflict)
	require.Contains(t, err.Error(), "overlaps the pin 198.51.1.0/24")
	err = add("198.51.2.0/24")
	require.ErrorIs(t, err, ErrPinConflict)
	require.Contains(t, err.Error(), "is pinned already")

	require.NoError(t, DeletePin(ctx, tx, d.AccountID, d.ID, d.Name, "198.51.3.0/24", now))
	for i := range MaxPins - 3 {
		require.NoError(t, add(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String()))
	}
	err = add("203.0.113.200")
	require.ErrorIs(t, err, ErrPinInvalid)
	require.Contains(t, err.Error(), "has 16 pins already")

	_, err = AddPin(ctx, tx, nil, d.AccountID, d.ID, d.Name, "192.0.2.1", strings.Repeat("é", MaxPinNote+1), now)
	require.ErrorIs(t, err, ErrPinInvalid)
	pins, err := Pins(ctx, tx, d.AccountID, d.ID)
	require.NoError(t, err)
	require.Len(t, pins, MaxPins)
	var targets int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM reputation_targets WHERE domain_id = $1 AND origin = 'pinned'`,
		d.ID).Scan(&targets))
	require.Equal(t, 3*256+13, targets, "every pinned address is a target")
}

// FuzzParsePin: whatever the input, a pin is a masked prefix of at most
// MaxPinAddresses addresses, or an ErrPinInvalid.
func FuzzParsePin(f *testing.F) {
	for _, s := range []string{"192.0.2.0/30", "2001:db8::/120", "192.0.2.1", "::ffff:1.2.3.4/128", "10.0.0.0/8", "", "1.2.3.4/-1",
		"fe80::1%eth0/128", "0.0.0.0/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePin(s)
		if err != nil {
			require.True(t, errors.Is(err, ErrPinInvalid), "%q: %v", s, err)
			return
		}
		require.Equal(t, p.Masked(), p)
		require.LessOrEqual(t, pinSize(p), MaxPinAddresses)
		require.Len(t, pinAddresses(p), pinSize(p))
		require.False(t, p.Addr().Is4In6())
	})
}

// TestKnownSenderIPsAreWatched: a source IP whose mail all failed DMARC is
// watched when its reverse DNS names a known sender (the reports
// package's rule: category non_compliant), origin "sender"; an unknown one
// is not.
func TestKnownSenderIPsAreWatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, _ := newCheckerZone(t, TestZone+"\n77.113.0.203.bl.test. 300 A 127.0.0.2\n")
	now := time.Now().UTC()
	d := testfactory.AccountDomain(t, tx, "senders.example")
	seedReports(t, tx, d.ID, now)
	day := now.UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	for _, r := range []struct{ ip, ptr string }{
		{"203.0.113.77", "a77-1.smtp-out.amazonses.com"}, {"203.0.113.78", "host78.dsl.unknown-isp.invalid"},
	} {
		_, err := tx.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
			compliant, forwarded, failing) VALUES ($1, $2, $3, 25, 0, 0, 0, 0, 25)`, d.ID, day, r.ip)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO source_ptrs (ip, ptr) VALUES ($1, $2) ON CONFLICT (ip) DO UPDATE SET ptr = excluded.ptr`,
			r.ip, r.ptr)
		require.NoError(t, err)
	}

	out, err := c.Check(ctx, tx, d.ID, now)
	require.NoError(t, err)
	require.Equal(t, 6, out.Targets, "the five of seedReports and the known sender's IP")
	st, err := Read(ctx, tx, c.Lists, d.AccountID, d.ID)
	require.NoError(t, err)
	byTarget := targetsOf(t, st)
	w := byTarget["203.0.113.77"]
	require.Equal(t, OriginSender, w.Origin)
	require.Equal(t, int64(25), w.Messages)
	require.Len(t, w.Listings, 1, "looked up and listed")
	require.NotContains(t, byTarget, "203.0.113.78", "an unknown source failing DMARC is not the domain's sender")
	require.NotContains(t, byTarget, "198.51.100.7")
	require.Len(t, eventsOf(t, tx, d.AccountID, events.TypeBlocklistListed), 2)
}

// TestPinnedDomainsAreScheduled: the hourly round checks a domain with a
// pin and no DMARC data, as it does one with reports; a domain with
// neither is left out.
func TestPinnedDomainsAreScheduled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := time.Now().UTC()
	pinned := testfactory.AccountDomain(t, tx, "scheduled-pin.example")
	reported := testfactory.AccountDomain(t, tx, "scheduled-reports.example")
	idle := testfactory.AccountDomain(t, tx, "scheduled-idle.example")
	seedReports(t, tx, reported.ID, now)
	_, err := AddPin(ctx, tx, nil, pinned.AccountID, pinned.ID, pinned.Name, "192.0.2.1", "", now)
	require.NoError(t, err)
	ids, err := dbsqlc.New().ReputationDomainsToCheck(ctx, tx, dbsqlc.ReputationDomainsToCheckParams{
		Since: now.Add(-WatchWindow), MaxRows: 1_000_000})
	require.NoError(t, err)
	require.Contains(t, ids, pinned.ID)
	require.Contains(t, ids, reported.ID)
	require.NotContains(t, ids, idle.ID)
}

// TestPinRemovedDuringCheck: a pin removed while a check waits for the
// list's answer on its address leaves no current listing: the check
// records only what is still watched, under the domain's watch lock (and
// a check that records first has its listing ended by the removal).
func TestPinRemovedDuringCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, TestZone)
	lists, err := blocklist.ParseZones("bl.test")
	require.NoError(t, err)
	c := &Checker{Resolver: dnscheck.NewClient(srv.Addr(), 10*time.Second), Lists: lists}
	now := time.Now().UTC()
	d := testfactory.AccountDomain(t, pool, "unpinned-midway.example")
	_, err = AddPin(ctx, pool, nil, d.AccountID, d.ID, d.Name, "192.0.2.10", "", now)
	require.NoError(t, err)
	srv.Delay(listedName, 700*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := c.Check(ctx, pool, d.ID, now)
		done <- err
	}()
	for srv.QueriesFor(listedName) == 0 { // the lookup is in flight
		runtime.Gosched()
	}
	require.NoError(t, DeletePin(ctx, pool, d.AccountID, d.ID, d.Name, "192.0.2.10", now))
	require.NoError(t, <-done)
	var listings int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reputation_listings WHERE domain_id = $1 AND delisted_at IS NULL`,
		d.ID).Scan(&listings))
	require.Zero(t, listings, "no current listing for an address no longer watched")
}
