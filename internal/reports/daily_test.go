package reports_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// spanning is a report for example.com over the three UTC days ending the
// day before now.
func spanning(now time.Time, reportID string, records ...string) []byte {
	end := now.Truncate(24 * time.Hour).Add(-24 * time.Hour)
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>google.com</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><adkim>r</adkim><aspf>r</aspf><p>none</p></policy_published>%s</feedback>`,
		reportID, end.Add(-72*time.Hour).Unix(), end.Unix(), strings.Join(records, "")))
}

func sumDays(days []reports.DayVolume) (out reports.DayVolume) {
	for _, d := range days {
		out.Compliant += d.Compliant
		out.Forwarded += d.Forwarded
		out.NonCompliant += d.NonCompliant
		out.ThreatUnknown += d.ThreatUnknown
	}
	return out
}

// TestDailyVolumeByCategory: a report spread over three days adds each
// source's share to its day, failing volume split by whether the source's
// reverse DNS name is a known sender's; a rebuild from the daily source
// rows (the backfill of domains stored before) gives the same days.
func TestDailyVolumeByCategory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dns := dnstest.Start(t, mixedZone)
	b.svc.Resolver = dnscheck.NewClient(dns.Addr(), time.Second)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	out := b.receive(t, d, reports.KindDMARC, spanning(now, "daily-1",
		record("192.0.2.10", 500, "pass", "fail", "pass"),    // Amazon SES, compliant
		record("192.0.2.20", 40, "fail", "fail", "fail"),     // SendGrid, failing: non_compliant
		record("192.0.2.30", 61, "pass", "fail", "fail"),     // Google, DKIM only: forwarded
		record("192.0.2.40", 400, "fail", "pass", "pass"),    // the domain's own server, compliant
		record("198.51.100.66", 25, "fail", "fail", "fail"))) // no PTR: threat_unknown
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)

	ctx := context.Background()
	today := now.Truncate(24 * time.Hour)
	days, err := reports.DailyVolume(ctx, b.tx, d, today.AddDate(0, 0, -5), today)
	require.NoError(t, err)
	require.Len(t, days, 6, "every day of the window, reported or not")
	for i, want := range []int64{0, 345, 341, 340, 0, 0} { // each source's remainder goes to the first days
		require.Equal(t, today.AddDate(0, 0, i-5), days[i].Day)
		require.Equal(t, want, days[i].Messages(), "day %d", i)
	}
	require.Equal(t, reports.DayVolume{Compliant: 900, Forwarded: 61, NonCompliant: 40, ThreatUnknown: 25}, sumDays(days))
	rate, ok := days[1].PassRate()
	require.True(t, ok)
	require.InDelta(t, float64(167+134+21)/345, rate, 1e-9)
	_, ok = days[0].PassRate()
	require.False(t, ok, "a day without reports has no pass rate")

	// A domain stored before the table: its rows are rebuilt once.
	_, err = b.tx.Exec(ctx, "DELETE FROM dmarc_domain_days WHERE domain_id = $1", d)
	require.NoError(t, err)
	_, err = b.tx.Exec(ctx, "DELETE FROM dmarc_domain_days_backfill")
	require.NoError(t, err)
	_, err = b.tx.Exec(ctx, "INSERT INTO dmarc_domain_days_backfill (domain_id) VALUES ($1)", d)
	require.NoError(t, err)
	n, err := reports.BackfillDays(ctx, b.tx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	rebuilt, err := reports.DailyVolume(ctx, b.tx, d, today.AddDate(0, 0, -5), today)
	require.NoError(t, err)
	require.Equal(t, days, rebuilt)
	n, err = reports.BackfillDays(ctx, b.tx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "each domain is rebuilt once")

	// A second report adds to the same days.
	out = b.receive(t, d, reports.KindDMARC, spanning(now, "daily-2", record("198.51.100.66", 3, "fail", "fail", "fail")))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	days, err = reports.DailyVolume(ctx, b.tx, d, today.AddDate(0, 0, -5), today)
	require.NoError(t, err)
	require.Equal(t, int64(28), sumDays(days).ThreatUnknown)
}

// TestDailyVolumeBounds: a window longer than MaxDailyDays is cut to its
// newest days, and one ending before it begins is refused.
func TestDailyVolumeBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	ctx := context.Background()
	until := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	days, err := reports.DailyVolume(ctx, b.tx, d, until.AddDate(-3, 0, 0), until)
	require.NoError(t, err)
	require.Len(t, days, reports.MaxDailyDays)
	require.Equal(t, until, days[len(days)-1].Day)
	_, err = reports.DailyVolume(ctx, b.tx, d, until, until.AddDate(0, 0, -1))
	require.Error(t, err)
}
