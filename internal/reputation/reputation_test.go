package reputation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestZones is the BLOCKLIST_ZONES of the tests: two healthy lists (one of
// IPs, one of domains) and one that does not list its test entry.
const TestZones = "bl.test, dom.test=domain, sick.test"

// TestZone serves the lists of TestZones on loopback.
const TestZone = `
; bl.test: healthy (RFC 5782 section 5 entries), 192.0.2.10 listed with a
; reason, 192.0.2.11 answered with an error code, 192.0.2.12 SERVFAIL (set
; by the test).
2.0.0.127.bl.test.   300 A   127.0.0.2
10.2.0.192.bl.test.  600 A   127.0.0.2
10.2.0.192.bl.test.  600 TXT "listed for spam, see https://bl.test/lookup"
11.2.0.192.bl.test.  300 A   127.255.255.254
; dom.test: healthy domain list.
test.dom.test.       300 A   127.0.0.2
; sick.test lists nothing, not even its test entry: unhealthy.
`

const (
	listedName = "10.2.0.192.bl.test."
	errorName  = "11.2.0.192.bl.test."
	failName   = "12.2.0.192.bl.test."
	// 2001:db8::1 under bl.test, nibbles reversed.
	ipv6Name = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.bl.test."
)

func newChecker(t *testing.T) (*Checker, *dnstest.Server) {
	t.Helper()
	return newCheckerZone(t, TestZone)
}

// newCheckerZone is newChecker serving zone.
func newCheckerZone(t *testing.T, zone string) (*Checker, *dnstest.Server) {
	t.Helper()
	srv := dnstest.Start(t, zone)
	srv.ServFail(failName)
	lists, err := blocklist.ParseZones(TestZones)
	require.NoError(t, err)
	return &Checker{Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second), Lists: lists,
		Limiter: blocklist.NewLimiter(1000, 100)}, srv
}

// seedReports stores DMARC source days in which 192.0.2.10 carries 40% of
// the domain's last 7 days of mail, 192.0.2.11 30%, 192.0.2.12 20% and
// 2001:db8::1 10%; 198.51.100.7 only failed DMARC and is not watched.
func seedReports(t *testing.T, db dbutil.Executor, domain uuid.UUID, now time.Time) {
	t.Helper()
	day := now.UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	for _, r := range []struct {
		ip                 string
		compliant, failing int
	}{{"192.0.2.10", 40, 0}, {"192.0.2.11", 30, 0}, {"192.0.2.12", 20, 0}, {"2001:db8::1", 10, 0}, {"198.51.100.7", 0, 0}} {
		_, err := db.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned,
			spf_aligned, compliant, forwarded, failing) VALUES ($1, $2, $3, $4, $4, $4, $4, 0, $5)`,
			domain, day, r.ip, r.compliant+r.failing, r.compliant)
		require.NoError(t, err)
	}
	// Outside the share window but inside the watch window: failing only.
	_, err := db.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned,
		spf_aligned, compliant, forwarded, failing) VALUES ($1, $2, '198.51.100.7', 50, 0, 0, 0, 0, 50)`, domain, day.Add(-9*24*time.Hour))
	require.NoError(t, err)
}

type storedEvent struct {
	Severity string
	Payload  map[string]any
}

func eventsOf(t *testing.T, db dbutil.Executor, account uuid.UUID, typ string) []storedEvent {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT severity, payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY created_at, id`, account, typ)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		var p []byte
		require.NoError(t, rows.Scan(&e.Severity, &p))
		require.NoError(t, json.Unmarshal(p, &e.Payload))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestCheckListsDelistsAndSharesLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, srv := newChecker(t)
	now := time.Now().UTC()
	a := testfactory.AccountDomain(t, tx, "a.example")
	b := testfactory.AccountDomain(t, tx, "b.example")
	seedReports(t, tx, a.ID, now)
	seedReports(t, tx, b.ID, now)

	out, err := c.Check(ctx, tx, a.ID, now)
	require.NoError(t, err)
	require.Equal(t, []string{"sick.test"}, out.Skipped, "the unhealthy list is skipped")
	require.Equal(t, 5, out.Targets, "four IPs of compliant mail and the domain; the failing-only IP is not watched")
	require.Equal(t, 2, out.Undecided, "the error code and the SERVFAIL decide nothing")
	require.Equal(t, 1, out.Listed)
	require.InDelta(t, 0.4, out.ListedShare, 1e-9)
	require.Zero(t, srv.QueriesFor("10.2.0.192.sick.test."), "no lookup on an unhealthy list")
	require.Equal(t, int64(1), srv.QueriesFor(ipv6Name), "IPv6 is queried by reversed nibbles")
	require.Equal(t, int64(1), srv.QueriesFor("a.example.dom.test."), "the domain is looked up on the domain list")

	listed := eventsOf(t, tx, a.AccountID, events.TypeBlocklistListed)
	require.Len(t, listed, 1, "exactly one listing: not the error code, not the SERVFAIL")
	require.Equal(t, "critical", listed[0].Severity, "40% of the mail is above the critical share")
	require.Equal(t, "192.0.2.10", listed[0].Payload["target"])
	require.Equal(t, "bl.test", listed[0].Payload["zone"])
	require.InDelta(t, 0.4, listed[0].Payload["share"], 1e-9)
	require.Equal(t, "listed for spam, see https://bl.test/lookup", listed[0].Payload["reason"])

	// The second account watches the same IPs: answered from the cache.
	listedQueries, ipv6Queries := srv.QueriesFor(listedName), srv.QueriesFor(ipv6Name)
	out, err = c.Check(ctx, tx, b.ID, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, out.Listed)
	require.Equal(t, 2, out.Cached, "the listed IP and the IPv6 one are answered from the shared cache")
	require.Equal(t, listedQueries, srv.QueriesFor(listedName), "one lookup per (list, IP) across accounts")
	require.Equal(t, ipv6Queries, srv.QueriesFor(ipv6Name))
	require.Len(t, eventsOf(t, tx, b.AccountID, events.TypeBlocklistListed), 1)

	// Checking again changes nothing and emits nothing.
	out, err = c.Check(ctx, tx, a.ID, now.Add(2*time.Minute))
	require.NoError(t, err)
	require.Zero(t, out.Listed)
	require.Len(t, eventsOf(t, tx, a.AccountID, events.TypeBlocklistListed), 1, "once per transition")

	st, err := Read(ctx, tx, c.Lists, a.AccountID, a.ID)
	require.NoError(t, err)
	require.InDelta(t, 0.4, st.ListedShare, 1e-9)
	require.Equal(t, "192.0.2.10", st.Targets[0].Target, "busiest first")
	require.Len(t, st.Targets[0].Listings, 1)
	require.Equal(t, "bl.test", st.Targets[0].Listings[0].Zone)
	require.NotNil(t, st.Targets[0].CheckedAt)

	// The record goes; once the cached answer expires the listing ends.
	srv.Remove(listedName, dns.TypeA)
	srv.Remove(listedName, dns.TypeTXT)
	later := now.Add(DefaultInterval + time.Hour)
	out, err = c.Check(ctx, tx, a.ID, later)
	require.NoError(t, err)
	require.Equal(t, 1, out.Delisted)
	require.Zero(t, out.ListedShare)
	delisted := eventsOf(t, tx, a.AccountID, events.TypeBlocklistDelisted)
	require.Len(t, delisted, 1)
	require.Equal(t, "192.0.2.10", delisted[0].Payload["target"])
	_, err = c.Check(ctx, tx, a.ID, later.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, eventsOf(t, tx, a.AccountID, events.TypeBlocklistDelisted), 1, "once per transition")
	require.Len(t, eventsOf(t, tx, a.AccountID, events.TypeBlocklistListed), 1)
}

// A listing whose IPs carry less than CriticalShare is a warning.
func TestListedSeverity(t *testing.T) {
	t.Parallel()
	require.Equal(t, events.SeverityCritical, listedSeverity(false, CriticalShare))
	require.Equal(t, events.SeverityWarning, listedSeverity(false, CriticalShare-0.01))
	require.Equal(t, events.SeverityInfo, listedSeverity(true, 0.9))
}

// TestConcurrentChecksShareOneLookup: domains of several accounts checked
// at the same time by separate workers send one lookup per (list, IP):
// the per-pair lock makes the others wait and read the cached answer.
func TestConcurrentChecksShareOneLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	c, srv := newChecker(t)
	now := time.Now().UTC()
	const n = 4
	ids := make([]uuid.UUID, n)
	for i := range ids {
		d := testfactory.AccountDomain(t, pool, "shared"+string(rune('a'+i))+".example")
		seedReports(t, pool, d.ID, now)
		ids[i] = d.ID
	}
	// A slow answer makes the checks overlap on the pair.
	srv.Delay(listedName, 300*time.Millisecond)
	errs := make(chan error, n)
	for _, id := range ids {
		go func() {
			_, err := c.Check(ctx, pool, id, now)
			errs <- err
		}()
	}
	for range ids {
		require.NoError(t, <-errs)
	}
	require.Equal(t, int64(2), srv.QueriesFor(listedName), "one lookup (A, then TXT for the reason) for every account")
	require.Equal(t, int64(1), srv.QueriesFor(ipv6Name))
	var listings int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reputation_listings WHERE delisted_at IS NULL`).Scan(&listings))
	require.Equal(t, n, listings, "each domain has its own listing")
}

// TestTimeoutChangesNothing: a list that does not answer for an IP (the
// query is dropped) decides nothing: no listing, no delisting of a listing
// it made before, nothing cached.
func TestTimeoutChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	srv := dnstest.Start(t, TestZone)
	lists, err := blocklist.ParseZones("bl.test")
	require.NoError(t, err)
	c := &Checker{Resolver: dnscheck.NewClient(srv.Addr(), 200*time.Millisecond), Lists: lists}
	d := testfactory.AccountDomain(t, tx, "timeout.example")
	seedReports(t, tx, d.ID, time.Now())
	srv.ServFail(failName)
	now := time.Now().UTC()
	out, err := c.Check(ctx, tx, d.ID, now)
	require.NoError(t, err)
	require.Equal(t, 1, out.Listed)

	// The listing's answer expires and the list stops answering for it.
	srv.Drop(listedName)
	later := now.Add(DefaultInterval + time.Hour)
	out, err = c.Check(ctx, tx, d.ID, later)
	require.NoError(t, err)
	require.Zero(t, out.Delisted, "a timeout is no delisting")
	require.Equal(t, 3, out.Undecided, "the dropped pair, the error code and the SERVFAIL")
	require.InDelta(t, 0.4, out.ListedShare, 1e-9, "the listing stands")
	require.Empty(t, eventsOf(t, tx, d.AccountID, events.TypeBlocklistDelisted))
	var status string
	var expires time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT status, expires_at FROM blocklist_lookups WHERE zone = 'bl.test' AND target = '192.0.2.10'`).
		Scan(&status, &expires))
	require.Equal(t, "listed", status)
	require.True(t, expires.Before(later), "the timeout cached nothing")
}
