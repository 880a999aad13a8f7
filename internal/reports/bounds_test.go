package reports_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/reports"
)

// wideReport is an aggregate report for example.com with one record per
// source IP, over [begin, end).
func wideReport(reportID string, sources int, begin, end time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<feedback><report_metadata><org_name>wide.example</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>
`, reportID, begin.Unix(), end.Unix())
	for i := range sources {
		n := i + 1
		fmt.Fprintf(&b, "<record><row><source_ip>10.%d.%d.%d</source_ip><count>%d</count><policy_evaluated>"+
			"<disposition>none</disposition><dkim>pass</dkim><spf>fail</spf></policy_evaluated></row>"+
			"<identifiers><header_from>example.com</header_from></identifiers></record>\n", n>>16&255, n>>8&255, n&255, 1+i%40)
	}
	b.WriteString("</feedback>\n")
	return b.Bytes()
}

// parseAllocated stores raw and parses it, and returns the outcome with the
// bytes the process allocated during the parse.
func (b *testBundle) parseAllocated(t *testing.T, domainID uuid.UUID, raw []byte) (reports.Outcome, uint64) {
	t.Helper()
	ctx := context.Background()
	var rec reports.Received
	require.NoError(t, pgx.BeginFunc(ctx, b.tx, func(tx pgx.Tx) error {
		var err error
		rec, err = b.svc.Receive(ctx, tx, reports.Incoming{AccountID: b.account, DomainID: domainID, Kind: reports.KindDMARC, Source: reports.SourceSMTP, Raw: raw})
		return err
	}))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := b.svc.Parse(ctx, rec.MessageID)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	return out, after.TotalAlloc - before.TotalAlloc
}

// TestParseWideReportBounded: a report whose source IPs x days exceed
// MaxSpreadRows is counted on its midpoint day, with a note saying so; the
// rows it adds and the memory its parse allocates follow its records, not
// its records times its days. (The second hostile probe's report, 50,000
// IPs over 31 days, took a worker to 2.9 GiB and wrote 1.55 million rows.)
//
// Not parallel: it reads the process's allocation counter, which tests
// running beside it would move.
func TestParseWideReportBounded(t *testing.T) {
	b := setup(t)
	d := b.domain(t, "example.com")
	sources := reports.MaxSpreadRows/31 + 200
	end := b.svc.Now().Add(-24 * time.Hour).Truncate(24 * time.Hour)
	begin := end.AddDate(0, 0, -31)

	daily, dailyAlloc := b.parseAllocated(t, d, wideReport("daily", sources, end.AddDate(0, 0, -1), end))
	require.Equal(t, reports.StatusAccepted, daily.Status, daily.Reason)
	require.Empty(t, daily.Reason)

	wide, wideAlloc := b.parseAllocated(t, d, wideReport("wide", sources, begin, end))
	require.Equal(t, reports.StatusAccepted, wide.Status, wide.Reason)
	mid := begin.Add(end.Sub(begin) / 2).Truncate(24 * time.Hour)
	require.Contains(t, wide.Reason, "counted on "+mid.Format(time.DateOnly))
	require.Contains(t, wide.Reason, fmt.Sprintf("%d source IPs x 31 days", sources))

	require.Equal(t, int64(sources), b.count(t, "SELECT count(*) FROM dmarc_source_days WHERE domain_id = $1 AND day = $2", d, mid),
		"one row per source IP, on the midpoint day")
	require.Equal(t, int64(2*sources), b.count(t, "SELECT count(*) FROM dmarc_source_days WHERE domain_id = $1", d))
	require.Equal(t, b.count(t, "SELECT message_count FROM dmarc_reports WHERE id = $1", wide.ReportID),
		b.count(t, "SELECT sum(messages) FROM dmarc_source_days WHERE domain_id = $1 AND day = $2", d, mid),
		"every message is counted")
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND reason LIKE 'counted on %'", d),
		"the note is stored on the report")

	t.Logf("allocated: daily %d KiB, 31 days %d KiB", dailyAlloc>>10, wideAlloc>>10)
	require.Less(t, wideAlloc, dailyAlloc*3/2, "the 31-day report allocates about what the same records over one day do")
}

// insertSourceDays fills days x ips daily rows (10.x.y.z), one message each.
func (b *testBundle) insertSourceDays(t *testing.T, domainID uuid.UUID, first time.Time, days, ips int) {
	t.Helper()
	_, err := b.tx.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing)
SELECT $1, $2::date + d, '10.' || (i >> 16) || '.' || ((i >> 8) & 255) || '.' || (i & 255), 1, 1, 0, 1, 0, 0
FROM generate_series(0, $3::int - 1) AS d, generate_series(1, $4::int) AS i`, domainID, first, days, ips)
	require.NoError(t, err)
}

// TestSourcesBoundedRead: a period holding more than MaxSourceRowsRead
// daily rows is read from its newest day back, whole days only, and the
// answer says so; a single day holding more is read in part. The
// listing, the health score's pass rate and guidance read alike.
func TestSourcesBoundedRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.svc.Now()
	first := now.AddDate(0, 0, -10).Truncate(24 * time.Hour)
	perDay := reports.MaxSourceRowsRead * 3 / 10 // four days do not fit, three do

	d := b.domain(t, "example.com")
	b.insertSourceDays(t, d, first, 4, perDay)
	list, err := b.svc.Sources(ctx, b.tx, d, first, now, reports.MaxSourcesListed)
	require.NoError(t, err)
	require.True(t, list.Truncated)
	require.Equal(t, first.AddDate(0, 0, 1), list.Since, "the oldest day does not fit")
	require.Len(t, list.Sources, reports.MaxSourcesListed, "the listing's first sources")
	require.Equal(t, reports.MaxSourceGroups, list.SourceCount, "of every IP summed")
	require.Equal(t, int64(3), list.Sources[0].Messages, "one message a day over the three days read")
	_, messages, err := reports.PassRate(ctx, b.tx, d, now)
	require.NoError(t, err)
	require.Equal(t, int64(3*perDay), messages)
	g, err := b.svc.Guidance(ctx, b.tx, d, "example.com", reports.Policy{P: "none"}, now)
	require.NoError(t, err)
	require.True(t, g.Truncated)
	require.Equal(t, first.AddDate(0, 0, 1), g.Since)

	list, err = b.svc.Sources(ctx, b.tx, d, first.AddDate(0, 0, 1), now, 1)
	require.NoError(t, err)
	require.False(t, list.Truncated, "three days fit")

	one := b.domain(t, "example.org")
	b.insertSourceDays(t, one, first, 1, 10)
	b.insertSourceDays(t, one, first.AddDate(0, 0, 1), 1, reports.MaxSourceRowsRead+10)
	list, err = b.svc.Sources(ctx, b.tx, one, first, now, 1)
	require.NoError(t, err)
	require.True(t, list.Truncated)
	require.Equal(t, first.AddDate(0, 0, 1), list.Since, "the newest day alone does not fit: it is read in part")
	_, messages, err = reports.PassRate(ctx, b.tx, one, now)
	require.NoError(t, err)
	require.Equal(t, int64(reports.MaxSourceRowsRead), messages)
}
