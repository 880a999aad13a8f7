package reports_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// aggregate is a report for example.com over the two days before now.
func aggregate(now time.Time, reportID string, records ...string) []byte {
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>google.com</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><adkim>r</adkim><aspf>r</aspf><p>none</p></policy_published>%s</feedback>`,
		reportID, now.Add(-48*time.Hour).Unix(), now.Add(-24*time.Hour).Unix()-1, strings.Join(records, "")))
}

// window30 is the readiness window ending at now, as the guidance and the
// default listing read it.
func window30(now time.Time) (time.Time, time.Time) { return now.Add(-reports.ReadinessWindow), now }

func (b *testBundle) sources(t *testing.T, d uuid.UUID, since, until time.Time) reports.SourceList {
	t.Helper()
	list, err := b.svc.Sources(context.Background(), b.tx, d, since, until, reports.MaxSourcesListed)
	require.NoError(t, err)
	return list
}

func (b *testBundle) summaryCurrent(t *testing.T, d uuid.UUID, since, until time.Time) bool {
	t.Helper()
	ok, err := b.svc.SummaryCurrent(context.Background(), b.tx, d, since, until)
	require.NoError(t, err)
	return ok
}

func byName(list reports.SourceList) map[string]reports.Source {
	got := map[string]reports.Source{}
	for _, s := range list.Sources {
		got[s.Name] = s
	}
	return got
}

// TestSourcesSummaryEqualsLive: the first read sums the daily rows and
// stores them; the next reads (listing, guidance, another window) answer
// exactly as the live sums did, from the summary.
func TestSourcesSummaryEqualsLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dns := dnstest.Start(t, mixedZone)
	b.svc.Resolver = dnscheck.NewClient(dns.Addr(), time.Second)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	out := b.receive(t, d, reports.KindDMARC, aggregate(now, "mixed-1",
		record("192.0.2.10", 500, "pass", "fail", "pass"), record("192.0.2.20", 40, "fail", "fail", "pass"),
		record("192.0.2.30", 60, "pass", "fail", "fail"), record("192.0.2.40", 400, "fail", "pass", "pass"),
		record("198.51.100.66", 25, "fail", "fail", "fail")))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	ctx := context.Background()
	since, until := window30(now)
	policy := reports.Policy{P: "none", ADKIM: "r", ASPF: "r"}

	require.False(t, b.summaryCurrent(t, d, since, until))
	live := b.sources(t, d, since, until)
	require.Len(t, live.Sources, 5)
	require.True(t, b.summaryCurrent(t, d, since, until), "the live read stored its sums")
	require.Equal(t, live, b.sources(t, d, since, until))
	liveGuidance, err := b.svc.Guidance(ctx, b.tx, d, "example.com", policy, now)
	require.NoError(t, err)
	require.Equal(t, int64(1025), liveGuidance.Readiness.Messages)

	// The stored summary is what answers: altered in place, it shows.
	_, err = b.tx.Exec(ctx, "UPDATE dmarc_source_summary_groups SET messages = messages + 1 WHERE domain_id = $1 AND kind = 0 AND rank = 0", d)
	require.NoError(t, err)
	require.Equal(t, live.Sources[0].Messages+1, b.sources(t, d, since, until).Sources[0].Messages)
	_, err = b.tx.Exec(ctx, "UPDATE dmarc_source_summary_groups SET messages = messages - 1 WHERE domain_id = $1 AND kind = 0 AND rank = 0", d)
	require.NoError(t, err)
	g, err := b.svc.Guidance(ctx, b.tx, d, "example.com", policy, now)
	require.NoError(t, err)
	require.Equal(t, liveGuidance, g)

	// Another window has its own summary and leaves the readiness one.
	other := b.sources(t, d, now.Add(-3*24*time.Hour), now)
	require.Equal(t, live.Sources, other.Sources)
	require.True(t, b.summaryCurrent(t, d, now.Add(-3*24*time.Hour), now))
	require.Equal(t, other, b.sources(t, d, now.Add(-3*24*time.Hour), now))
	require.True(t, b.summaryCurrent(t, d, since, until))
	empty := b.sources(t, d, now.Add(-10*24*time.Hour), now.Add(-5*24*time.Hour))
	require.Empty(t, empty.Sources)
	require.Equal(t, empty, b.sources(t, d, now.Add(-10*24*time.Hour), now.Add(-5*24*time.Hour)))

	// Deleting the domain takes its summaries and version with it.
	_, err = b.tx.Exec(ctx, "DELETE FROM domains WHERE id = $1", d)
	require.NoError(t, err)
	require.Equal(t, int64(0), b.count(t, "SELECT count(*) FROM dmarc_source_summaries WHERE domain_id = $1", d))
	require.Equal(t, int64(0), b.count(t, "SELECT count(*) FROM dmarc_source_versions WHERE domain_id = $1", d))
}

// TestSourcesSummaryFollowsNewReports: a report stored through the parse
// path after a read shows on the next read, though a summary was stored.
func TestSourcesSummaryFollowsNewReports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	since, until := window30(now)
	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-1", record("192.0.2.1", 10, "pass", "pass", "pass")))
	first := byName(b.sources(t, d, since, until))
	require.Equal(t, int64(10), first["192.0.2.1"].Messages)
	require.True(t, b.summaryCurrent(t, d, since, until))

	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-2",
		record("192.0.2.1", 5, "fail", "fail", "fail"), record("192.0.2.2", 7, "pass", "pass", "pass")))
	require.False(t, b.summaryCurrent(t, d, since, until), "the parse bumped the domain's version in its transaction")
	second := byName(b.sources(t, d, since, until))
	require.Equal(t, int64(15), second["192.0.2.1"].Messages)
	require.Equal(t, int64(5), second["192.0.2.1"].Failing)
	require.Equal(t, int64(7), second["192.0.2.2"].Messages)
	g, err := b.svc.Guidance(context.Background(), b.tx, d, "example.com", reports.Policy{P: "none"}, now)
	require.NoError(t, err)
	require.Equal(t, int64(22), g.Readiness.Messages)

	// Another domain's report leaves this domain's summary current.
	other := b.domain(t, "example.org")
	require.True(t, b.summaryCurrent(t, d, since, until))
	_, err = b.tx.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned,
		spf_aligned, compliant, forwarded, failing) VALUES ($1, $2, '192.0.2.1', 1, 1, 1, 1, 0, 0)`, other, now.Add(-24*time.Hour))
	require.NoError(t, err)
	require.True(t, b.summaryCurrent(t, d, since, until))
}

// TestSourcesSummaryFollowsReparse: a failed report parsed again by the
// reparse task shows on the next read.
func TestSourcesSummaryFollowsReparse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	since, until := window30(now)
	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-1", record("192.0.2.9", 4, "pass", "pass", "pass")))
	failed := b.insertFailed(t, d, validReport(t, now, "fixed-1"), 100)
	require.Equal(t, int64(4), byName(b.sources(t, d, since, until))["192.0.2.9"].Messages)
	require.NotContains(t, byName(b.sources(t, d, since, until)), "192.0.2.1")

	require.Equal(t, 1, b.requeueAll(t))
	_, err := b.svc.Parse(context.Background(), failed)
	require.NoError(t, err)
	got := byName(b.sources(t, d, since, until))
	require.Equal(t, int64(3), got["192.0.2.1"].Messages, "the reparsed report's source")
	require.Equal(t, int64(4), got["192.0.2.9"].Messages)
}

// TestSourcesSummaryNamesFollowPTRs: names are applied when a summary is
// computed. A PTR learned later through another domain's report (PTRs are
// shared) shows once the summary is older than SummaryMaxAge; a report of
// the domain itself names its new IPs at once (its parse resolves them,
// then bumps the domain's version).
func TestSourcesSummaryNamesFollowPTRs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	since, until := window30(now)
	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-1", record("192.0.2.10", 9, "pass", "fail", "pass")))
	got := byName(b.sources(t, d, since, until))
	require.Contains(t, got, "192.0.2.10", "no PTR known: named by its IP")
	require.False(t, got["192.0.2.10"].Known)

	dns := dnstest.Start(t, mixedZone)
	b.svc.Resolver = dnscheck.NewClient(dns.Addr(), time.Second)
	other := b.domain(t, "example.org")
	report := strings.ReplaceAll(string(aggregate(now, "r-2", record("192.0.2.10", 1, "pass", "fail", "pass"))), "example.com", "example.org")
	require.Equal(t, reports.StatusAccepted, b.receive(t, other, reports.KindDMARC, []byte(report)).Status)
	require.True(t, b.summaryCurrent(t, d, since, until), "a PTR write invalidates no summary")
	require.Contains(t, byName(b.sources(t, d, since, until)), "192.0.2.10", "named as computed, within its age")

	b.svc.Now = func() time.Time { return now.Add(reports.SummaryMaxAge + time.Minute) }
	require.False(t, b.summaryCurrent(t, d, since, until), "older than its age")
	got = byName(b.sources(t, d, since, until))
	ses := got["Amazon SES"]
	require.True(t, ses.Known)
	require.Equal(t, int64(9), ses.Messages)
	require.Equal(t, "a27-10.smtp-out.amazonses.com", ses.IPs[0].PTR)
	require.True(t, b.summaryCurrent(t, d, since, until))

	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-3", record("192.0.2.20", 4, "pass", "pass", "pass")))
	got = byName(b.sources(t, d, since, until))
	require.Equal(t, int64(4), got["Twilio SendGrid"].Messages, "the domain's own report named at once")
}

// TestSourcesSummarySurvivesRollback: a writer that rolls back leaves the
// stored summary current (its version bump is rolled back with its rows),
// while inside its transaction the summary is not current.
func TestSourcesSummarySurvivesRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	since, until := window30(now)
	b.receive(t, d, reports.KindDMARC, aggregate(now, "r-1", record("192.0.2.1", 10, "pass", "pass", "pass")))
	before := b.sources(t, d, since, until)
	require.True(t, b.summaryCurrent(t, d, since, until))

	ctx := context.Background()
	errRollback := fmt.Errorf("roll back")
	err := pgx.BeginFunc(ctx, b.tx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
			compliant, forwarded, failing) VALUES ($1, $2, '192.0.2.1', 5, 0, 0, 0, 0, 5)
			ON CONFLICT (domain_id, day, source_ip) DO UPDATE SET messages = dmarc_source_days.messages + 5`, d, now.Add(-24*time.Hour))
		require.NoError(t, err)
		ok, err := b.svc.SummaryCurrent(ctx, tx, d, since, until)
		require.NoError(t, err)
		require.False(t, ok, "any write of the daily rows bumps the version")
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	require.True(t, b.summaryCurrent(t, d, since, until), "the rolled-back write left the summary current")
	require.Equal(t, before, b.sources(t, d, since, until))
}

// TestSourcesListsTheFirst: a listing returns the first sources by volume
// and says how many there are; a source lists its busiest IPs and says how
// many it has. The stored summary answers alike, and the readiness counts
// every source, listed or not.
func TestSourcesListsTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	since, until := window30(now)
	b.insertSourceDays(t, d, now.AddDate(0, 0, -3), 2, 180)
	// The first 60 IPs (10.0.0.1 to 10.0.0.60) are SendGrid's.
	_, err := b.tx.Exec(ctx, `INSERT INTO source_ptrs (ip, ptr, resolved_at)
		SELECT '10.0.0.' || i, 'o' || i || '.ptr1234.sendgrid.net', now() FROM generate_series(1, 60) AS i`)
	require.NoError(t, err)

	live, err := b.svc.Sources(ctx, b.tx, d, since, until, 10)
	require.NoError(t, err)
	require.Len(t, live.Sources, 10)
	require.Equal(t, 121, live.SourceCount, "SendGrid and 120 unknown IPs")
	sg := live.Sources[0]
	require.Equal(t, "Twilio SendGrid", sg.Name)
	require.Equal(t, int64(120), sg.Messages)
	require.Equal(t, 60, sg.IPCount)
	require.Len(t, sg.IPs, reports.MaxSourceIPsListed)
	require.True(t, b.summaryCurrent(t, d, since, until))

	stored, err := b.svc.Sources(ctx, b.tx, d, since, until, 10)
	require.NoError(t, err)
	require.Equal(t, live, stored)
	all, err := b.svc.Sources(ctx, b.tx, d, since, until, reports.MaxSourcesListed)
	require.NoError(t, err)
	require.Len(t, all.Sources, 121)
	require.Equal(t, live.Sources, all.Sources[:10])

	g, err := b.svc.Guidance(ctx, b.tx, d, "example.com", reports.Policy{P: "none"}, now)
	require.NoError(t, err)
	require.Equal(t, int64(360), g.Readiness.Messages, "every source counts")
	require.Equal(t, int64(360), g.Readiness.LegitimateMessages)
}
