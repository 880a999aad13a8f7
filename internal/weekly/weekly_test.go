package weekly_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/weekly"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// now is a Tuesday: the digest reports Monday Nov 16 to Sunday Nov 22, and
// compares it with the week from Nov 9.
var now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func TestWeekOf(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{
		time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC),   // the next Monday, at midnight
		time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC),  // Tuesday
		time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC), // Sunday night
	} {
		require.Equal(t, want, weekly.WeekOf(at), at)
	}
	require.Equal(t, want.AddDate(0, 0, 7), weekly.WeekOf(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)))
}

type fixture struct {
	t       *testing.T
	tx      pgx.Tx
	account uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	tx := dbtest.Tx(t)
	return &fixture{t: t, tx: tx, account: testfactory.Account(t, tx)}
}

// domain adds a domain whose last check found a DMARC record at p.
func (f *fixture) domain(name, p string, tags ...string) uuid.UUID {
	d := testfactory.Domain(f.t, f.tx, f.account, name, tags...)
	if p != "" {
		rs, err := json.Marshal(dnscheck.Results{DMARC: &dnscheck.DMARCResult{Policy: p, Parsed: &dmarc.Record{Policy: p}}})
		require.NoError(f.t, err)
		_, err = f.tx.Exec(context.Background(), `UPDATE domains SET results = $2, checked_at = now() WHERE id = $1`, d.ID, rs)
		require.NoError(f.t, err)
	}
	return d.ID
}

// days writes a source IP's daily rows from first for n days, then
// rebuilds the domain's daily categories from them as the backfill does.
func (f *fixture) days(domain uuid.UUID, ip string, first time.Time, n int, compliant, forwarded, failing int64) {
	ctx := context.Background()
	for i := range n {
		_, err := f.tx.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
			compliant, forwarded, failing) VALUES ($1, $2, $3, $4, $5, $5, $5, $6, $7)`,
			domain, first.AddDate(0, 0, i), ip, compliant+forwarded+failing, compliant, forwarded, failing)
		require.NoError(f.t, err)
	}
	require.NoError(f.t, pgx.BeginFunc(ctx, f.tx, func(tx pgx.Tx) error { return reports.RebuildDays(ctx, tx, domain) }))
}

func (f *fixture) event(typ, severity, domain string, at time.Time, payload map[string]any) {
	p, err := json.Marshal(payload)
	require.NoError(f.t, err)
	_, err = f.tx.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, domain, payload, rendered, created_at)
		VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, '{}', $6)`, f.account, typ, severity, domain, p, at)
	require.NoError(f.t, err)
}

func (f *fixture) render(set weekly.Settings) (*weekly.Report, weekly.Message) {
	b := &weekly.Builder{DB: f.tx, Reports: reports.NewService(f.tx, nil, ""), Link: "https://mailwatch.example"}
	r, err := b.Build(context.Background(), f.account, weekly.WeekOf(now), set, now)
	require.NoError(f.t, err)
	m, err := weekly.Render(r)
	require.NoError(f.t, err)
	return r, m
}

// golden compares the mail's parts with testdata/<name>.{txt,html};
// MW_UPDATE_GOLDEN=1 writes them instead.
func golden(t *testing.T, name string, m weekly.Message) {
	t.Helper()
	for ext, got := range map[string]string{"txt": "Subject: " + m.Subject + "\n\n" + m.Text, "html": m.HTML} {
		path := filepath.Join("testdata", name+"."+ext)
		if os.Getenv("MW_UPDATE_GOLDEN") != "" {
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(want), got, "%s (MW_UPDATE_GOLDEN=1 rewrites it)", path)
	}
}

var (
	week = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	prev = week.AddDate(0, 0, -7)
)

// TestBusyWeek: three domains, one improving with two new sources and an
// open alert, one getting worse from a known sender's failures (SendGrid,
// by its PTR), one whose
// reports stopped; each section says so, and the overall table sums them.
func TestBusyWeek(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.domain("a.example", "none", "prod")
	b := f.domain("b.example", "quarantine", "prod")
	c := f.domain("c.example", "none", "staging")
	f.days(a, "192.0.2.10", prev, 7, 900, 0, 100)
	f.days(a, "192.0.2.10", week, 7, 980, 10, 0)
	f.days(a, "203.0.113.7", week.AddDate(0, 0, 2), 1, 0, 0, 40)
	_, err := f.tx.Exec(context.Background(), `INSERT INTO source_ptrs (ip, ptr) VALUES ('198.51.100.20', 'o1.ptr1234.sendgrid.net')
		ON CONFLICT (ip) DO UPDATE SET ptr = EXCLUDED.ptr`)
	require.NoError(t, err)
	f.days(b, "198.51.100.20", prev, 7, 500, 0, 0)
	f.days(b, "198.51.100.20", week, 7, 450, 0, 50)
	f.days(c, "192.0.2.99", prev, 3, 20, 0, 0)
	f.event(events.TypeDMARCNewSource, "warning", "a.example", week.Add(50*time.Hour),
		map[string]any{"domain": "a.example", "source_ip": "203.0.113.7", "ptr": "", "messages": 40, "failing": 40, "category": "threat_unknown"})
	f.event(events.TypeDMARCNewSource, "warning", "a.example", week.Add(51*time.Hour),
		map[string]any{"domain": "a.example", "source_ip": "203.0.113.8", "ptr": "host.example.net", "messages": 12, "failing": 12, "category": "threat_unknown"})
	f.event(events.TypeDMARCNewSource, "warning", "a.example", prev.Add(time.Hour), // the week before: not new this week
		map[string]any{"domain": "a.example", "source_ip": "203.0.113.9", "messages": 99, "failing": 99, "category": "threat_unknown"})
	f.event(events.TypeHealthScoreChanged, "critical", "a.example", week.Add(time.Hour), map[string]any{"domain": "a.example"})

	r, m := f.render(weekly.Defaults)
	require.Len(t, r.Domains, 3)
	require.Equal(t, int64(7*990+40+7*500), r.Totals.Messages)
	require.Equal(t, 2, r.Totals.NewSources, "only the week's new sources")
	require.Equal(t, int64(1), r.Totals.OpenAlerts)
	require.Equal(t, "up", weekly.Trend(r.Domains[0].Passing, r.Domains[0].Messages, r.Domains[0].PrevPassing, r.Domains[0].PrevMessages))
	require.Equal(t, "down", weekly.Trend(r.Domains[1].Passing, r.Domains[1].Messages, r.Domains[1].PrevPassing, r.Domains[1].PrevMessages))
	require.Equal(t, int64(350), r.Domains[1].NonCompliant, "SendGrid's failures: a known sender's")
	require.False(t, r.Domains[1].Readiness.Ready)
	require.Zero(t, r.Domains[2].Messages)
	golden(t, "busy", m)

	// Narrowed to a tag: only its domains.
	r, _ = f.render(weekly.Settings{Enabled: true, Tags: []string{"staging"}})
	require.Len(t, r.Domains, 1)
	require.Equal(t, "c.example", r.Domains[0].Name)
}

// TestQuietWeek: reports as usual, nothing new, no alert: the digest
// still goes out and says it was quiet.
func TestQuietWeek(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.domain("quiet.example", "reject")
	f.days(a, "192.0.2.10", prev, 7, 300, 0, 0)
	f.days(a, "192.0.2.10", week, 7, 300, 0, 1)
	_, m := f.render(weekly.Defaults)
	require.Contains(t, m.Text, "A quiet week")
	golden(t, "quiet", m)
}

// TestNoReportsWeek: a domain without any report: the digest says no
// report arrived, in the subject too.
func TestNoReportsWeek(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.domain("new.example", "")
	_, m := f.render(weekly.Defaults)
	require.Contains(t, m.Subject, "no DMARC reports arrived")
	golden(t, "noreports", m)
}

// TestSettings: defaults without a row; names normalised, deduplicated
// and sorted; bad names and too many refused with the field.
func TestSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s, err := weekly.Load(ctx, f.tx, f.account)
	require.NoError(t, err)
	require.Equal(t, weekly.Defaults, s)
	s, err = weekly.Save(ctx, f.tx, f.account, weekly.Settings{Enabled: true, Domains: []string{"B.example.", "a.example", "b.example"},
		Tags: []string{" prod "}, ReplaceDaily: true})
	require.NoError(t, err)
	require.Equal(t, weekly.Settings{Enabled: true, Domains: []string{"a.example", "b.example"}, Tags: []string{"prod"}, ReplaceDaily: true}, s)
	got, err := weekly.Load(ctx, f.tx, f.account)
	require.NoError(t, err)
	require.Equal(t, s, got)
	require.True(t, s.Chooses("a.example", nil))
	require.True(t, s.Chooses("c.example", []string{"prod"}))
	require.False(t, s.Chooses("c.example", []string{"dev"}))

	_, err = weekly.Save(ctx, f.tx, f.account, weekly.Settings{Domains: []string{"not a domain"}})
	var inv *weekly.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "domains", inv.Field)
	many := make([]string, weekly.MaxSettingTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	_, err = weekly.Save(ctx, f.tx, f.account, weekly.Settings{Tags: many})
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "tags", inv.Field)
}
