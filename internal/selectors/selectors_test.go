package selectors_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/selectors"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type fixture struct {
	t  *testing.T
	tx pgx.Tx
	em *events.Emitter
	d  selectors.Domain
}

func newFixture(t *testing.T) *fixture {
	tx := dbtest.Tx(t)
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	d := testfactory.AccountDomain(t, tx, "example.com")
	return &fixture{t: t, tx: tx, em: &events.Emitter{River: client},
		d: selectors.Domain{ID: d.ID, AccountID: d.AccountID, Name: d.Name, Tags: d.Tags}}
}

func (f *fixture) events(typ string) int64 {
	var n int64
	require.NoError(f.t, f.tx.QueryRow(context.Background(), "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2",
		f.d.AccountID, typ).Scan(&n))
	return n
}

func (f *fixture) list(now time.Time) map[string]selectors.Selector {
	list, err := selectors.List(context.Background(), f.tx, f.d.ID, now)
	require.NoError(f.t, err)
	out := map[string]selectors.Selector{}
	for _, s := range list {
		out[s.Selector] = s
	}
	return out
}

func (f *fixture) dns(now time.Time, sels ...dnscheck.DKIMSelector) {
	require.NoError(f.t, pgx.BeginFunc(context.Background(), f.tx, func(tx pgx.Tx) error {
		return selectors.SeenInDNS(context.Background(), tx, f.em, f.d, &dnscheck.DKIMResult{Result: dnscheck.Result{Status: dnscheck.StatusPass}, Selectors: sels}, now)
	}))
}

func (f *fixture) report(now time.Time, uses ...selectors.Use) {
	require.NoError(f.t, pgx.BeginFunc(context.Background(), f.tx, func(tx pgx.Tx) error {
		return selectors.SeenInReport(context.Background(), tx, f.em, f.d, uses, now)
	}))
}

func key(typ string, bits int) *dnscheck.DKIMKey { return &dnscheck.DKIMKey{KeyType: typ, Bits: bits} }

// TestInventory: selectors seen in reports and DNS, each new one announced
// once; a weak key once per record; a published selector unseen in
// reports for 90 days idle once, cleared when a report shows it again; one
// no longer published and not reported is retired.
func TestInventory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	f.report(now, selectors.Use{Selector: "s1", Sources: []string{"192.0.2.1", "192.0.2.2"}, Messages: 10})
	f.report(now.Add(time.Hour), selectors.Use{Selector: "s1", Sources: []string{"192.0.2.3"}, Messages: 1})
	require.Equal(t, int64(1), f.events(events.TypeDKIMSelectorNew), "s1 announced once")
	require.Equal(t, []string{"192.0.2.3", "192.0.2.1", "192.0.2.2"}, f.list(now)["s1"].Sources, "the latest first")

	f.dns(now.Add(2*time.Hour),
		dnscheck.DKIMSelector{Selector: "s1", Status: dnscheck.StatusPass, Key: key("rsa", 2048), Record: "v=DKIM1; p=A"},
		dnscheck.DKIMSelector{Selector: "old", Status: dnscheck.StatusWarn, Key: key("rsa", 1024), Record: "v=DKIM1; p=B"},
		dnscheck.DKIMSelector{Selector: "gone", Status: dnscheck.StatusNone})
	require.Equal(t, int64(2), f.events(events.TypeDKIMSelectorNew), "old is new, from DNS; gone was never published")
	require.Equal(t, int64(1), f.events(events.TypeDKIMKeyWeak))
	inv := f.list(now.Add(2 * time.Hour))
	require.Len(t, inv, 2)
	require.Equal(t, selectors.StatusActive, inv["s1"].Status)
	require.True(t, inv["old"].Weak)
	require.Equal(t, 1024, inv["old"].KeyBits)
	require.Contains(t, inv["old"].SuggestedAction, "2048-bit")

	// The same weak key again: no event; a new weak key: one.
	f.dns(now.Add(3*time.Hour), dnscheck.DKIMSelector{Selector: "old", Status: dnscheck.StatusWarn, Key: key("rsa", 1024), Record: "v=DKIM1; p=B"})
	require.Equal(t, int64(1), f.events(events.TypeDKIMKeyWeak))
	f.dns(now.Add(4*time.Hour), dnscheck.DKIMSelector{Selector: "old", Status: dnscheck.StatusWarn, Key: key("rsa", 1536), Record: "v=DKIM1; p=C"})
	require.Equal(t, int64(2), f.events(events.TypeDKIMKeyWeak))

	// 90 days on: both are published; only "old" was never in a report
	// since, but s1's last report is as old. Without reports that cover the
	// period, unseen says nothing: none is idle.
	require.Zero(t, watchAt(t, f, now.Add(selectors.IdleAfter+5*time.Hour)), "no reporter covers the period")
	_, err := f.tx.Exec(context.Background(), `INSERT INTO dmarc_reporters (domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports)
		VALUES ($1, 'google.com', $2, $3, '{}', 90)`, f.d.ID, now.Add(-time.Hour), now.Add(selectors.IdleAfter))
	require.NoError(t, err)
	watch := func(at time.Time) int { return watchAt(t, f, at) }
	require.Zero(t, watch(now.Add(selectors.IdleAfter-time.Hour)))
	require.Equal(t, 2, watch(now.Add(selectors.IdleAfter+5*time.Hour)))
	require.Zero(t, watch(now.Add(selectors.IdleAfter+6*time.Hour)), "once per idle period")
	later := now.Add(selectors.IdleAfter + 7*time.Hour)
	require.Equal(t, selectors.StatusIdle, f.list(later)["old"].Status)
	require.Contains(t, f.list(later)["old"].SuggestedAction, "remove its DNS record")

	// s1 signs again: active; "old" is removed from DNS: retired.
	f.report(later, selectors.Use{Selector: "s1", Sources: []string{"192.0.2.1"}, Messages: 5})
	f.dns(later, dnscheck.DKIMSelector{Selector: "old", Status: dnscheck.StatusNone})
	inv = f.list(later)
	require.Equal(t, selectors.StatusActive, inv["s1"].Status)
	require.Nil(t, inv["s1"].IdleSince)
	require.Equal(t, selectors.StatusRetired, inv["old"].Status)
	require.Equal(t, int64(2), f.events(events.TypeDKIMSelectorIdle))
}

// TestInventoryBounded: past MaxPerDomain a new selector is not kept, and
// a DNS check that failed (temperror) changes nothing.
func TestInventoryBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	_, err := f.tx.Exec(context.Background(), `INSERT INTO dkim_selectors (domain_id, selector, first_seen_at)
		SELECT $1, 'k' || i, now() FROM generate_series(1, $2::int) i`, f.d.ID, selectors.MaxPerDomain)
	require.NoError(t, err)
	f.report(now, selectors.Use{Selector: "extra", Sources: []string{"192.0.2.1"}})
	f.dns(now, dnscheck.DKIMSelector{Selector: "extra2", Status: dnscheck.StatusPass, Key: key("ed25519", 256)})
	require.Len(t, f.list(now), selectors.MaxPerDomain)
	require.Zero(t, f.events(events.TypeDKIMSelectorNew))
	require.NoError(t, pgx.BeginFunc(context.Background(), f.tx, func(tx pgx.Tx) error {
		return selectors.SeenInDNS(context.Background(), tx, f.em, f.d, &dnscheck.DKIMResult{Result: dnscheck.Result{Status: dnscheck.StatusTemperror},
			Selectors: []dnscheck.DKIMSelector{{Selector: "k1", Status: dnscheck.StatusNone}}}, now)
	}))
	require.False(t, f.list(now)["k1"].Published)
	require.False(t, selectors.Weak("ed25519", 256))
	require.True(t, selectors.Weak("rsa", 1024))
}

func watchAt(t *testing.T, f *fixture, at time.Time) int {
	t.Helper()
	n, err := selectors.WatchIdle(context.Background(), f.tx, f.em, at, 10)
	require.NoError(t, err)
	return n
}
