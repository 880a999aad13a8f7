package reports_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// fromOrg is a one-record aggregate report of org for example.com over
// the day before at.
func fromOrg(org, id string, at time.Time) []byte {
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>%s</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>%s</feedback>`,
		org, id, at.Add(-24*time.Hour).Unix(), at.Add(-time.Second).Unix(), record("192.0.2.1", 5, "pass", "pass", "pass")))
}

// TestReportHeartbeat: a reporter that sent a report every day for a week
// and fell silent raises dmarc_reports_stopped once after 3 days, and
// dmarc_reports_resumed with its next report; one that reported twice in
// the week never does.
func TestReportHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	at := start
	b.svc.Now = func() time.Time { return at }
	for i := range 7 {
		at = start.AddDate(0, 0, i)
		require.Equal(t, reports.StatusAccepted, b.receive(t, d, reports.KindDMARC, fromOrg(" Google.COM ", fmt.Sprint("g", i), at)).Status)
		if i == 2 || i == 5 {
			require.Equal(t, reports.StatusAccepted, b.receive(t, d, reports.KindDMARC, fromOrg("Yahoo", fmt.Sprint("y", i), at)).Status)
		}
	}
	last := at
	list, err := reports.Reporters(ctx, b.tx, d, last)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "google.com", list[0].Name, "the name trimmed and lower-cased")
	require.Equal(t, reports.ReporterDaily, list[0].Status)
	require.Equal(t, 7, list[0].DaysReported7)
	require.Equal(t, reports.ReporterOccasional, list[1].Status)

	watch := func(now time.Time) int {
		t.Helper()
		n, err := reports.WatchReporters(ctx, b.tx, b.svc.Emitter, now, 10)
		require.NoError(t, err)
		return n
	}
	stopped := func() int64 {
		return b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_reports_stopped'", b.account)
	}
	require.Zero(t, watch(last.Add(reports.ReporterSilence-time.Minute)), "silent for less than 3 days")
	require.Equal(t, 1, watch(last.Add(reports.ReporterSilence+time.Hour)))
	require.Zero(t, watch(last.Add(reports.ReporterSilence+2*time.Hour)), "once per silence")
	require.Equal(t, int64(1), stopped(), "the occasional reporter never")
	require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_reports_stopped'
		AND payload->>'reporter' = 'google.com' AND (payload->>'silent_hours')::int = 73 AND (payload->>'days_reported')::int = 7`, b.account))
	list, err = reports.Reporters(ctx, b.tx, d, last.Add(4*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, "google.com", list[0].Name)
	require.Equal(t, reports.ReporterStopped, list[0].Status)
	require.Equal(t, 3, list[0].DaysReported7, "its last 3 days are among the 7 ending then")

	// Its next report: resumed, and watched again.
	at = last.Add(5 * 24 * time.Hour)
	require.Equal(t, reports.StatusAccepted, b.receive(t, d, reports.KindDMARC, fromOrg("google.com", "g-back", at)).Status)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_reports_resumed' AND payload->>'reporter' = 'google.com'", b.account))
	list, err = reports.Reporters(ctx, b.tx, d, at)
	require.NoError(t, err)
	require.Equal(t, "google.com", list[0].Name)
	require.NotEqual(t, reports.ReporterStopped, list[0].Status)
	require.Nil(t, list[0].StoppedAt)
	for _, typ := range []string{events.TypeDMARCReportsStopped, events.TypeDMARCReportsResumed} {
		require.Zero(t, b.count(t, "SELECT count(*) FROM events WHERE event_type = $1 AND NOT (payload ? 'reporter')", typ))
	}
}

// TestReportersBounded: past MaxReporters a new reporter's report is
// stored, but the reporter is not kept.
func TestReportersBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	_, err := b.tx.Exec(context.Background(), `INSERT INTO dmarc_reporters (domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports)
		SELECT $1, 'r' || i, now(), now(), '{}', 1 FROM generate_series(1, $2::int) i`, d, reports.MaxReporters)
	require.NoError(t, err)
	require.Equal(t, reports.StatusAccepted, b.receive(t, d, reports.KindDMARC, fromOrg("one too many", "x", b.svc.Now())).Status)
	require.Equal(t, int64(reports.MaxReporters), b.count(t, "SELECT count(*) FROM dmarc_reporters WHERE domain_id = $1", d))
}

// TestFailureReportEvents: the first failure report raises
// dmarc_failure_report with the failing source; another within the hour
// raises none; the next after the hour says one was suppressed.
func TestFailureReportEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	raw := corpus.Read(t, "dmarc-forensic/dmarc_ruf_report_linkedin.eml")
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	b.svc.Now = func() time.Time { return at }
	failures := func() int64 {
		return b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_failure_report'", b.account)
	}
	for i, step := range []time.Duration{0, 10 * time.Minute, 70 * time.Minute} {
		at = at.Add(step)
		// The same report again is a new message: its bytes differ by a header.
		out := b.receive(t, d, reports.KindDMARC, append([]byte(fmt.Sprintf("X-Test: %d\r\n", i)), raw...))
		require.Equal(t, reports.TypeFailure, out.ReportType)
	}
	require.Equal(t, int64(2), failures(), "the second within the hour is suppressed")
	require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_failure_report'
		AND payload->>'source_ip' = '10.10.10.10' AND (payload->>'suppressed')::int = 0`, b.account))
	require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_failure_report'
		AND (payload->>'suppressed')::int = 1`, b.account), "the next event counts the suppressed one")
}

func TestReporterName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "google.com", reports.ReporterName("  Google.COM\t"))
	require.Equal(t, "enterprise outlook", reports.ReporterName("Enterprise   Outlook"))
	require.Equal(t, "unknown", reports.ReporterName(" "))
	require.Equal(t, "unknown", reports.ReporterName(string(make([]rune, 300))), "control characters are dropped")
	require.Equal(t, "ab", reports.ReporterName("a\x00b\xff"))
	require.Len(t, []rune(reports.ReporterName(string(make([]rune, 300))+strings.Repeat("é", 300))), 100)
}

// FuzzReporterName: any org_name becomes a key Postgres stores: valid
// UTF-8 without control characters, 1 to 100 characters, and the same
// key again when normalised twice.
func FuzzReporterName(f *testing.F) {
	for _, s := range []string{"google.com", " Yahoo! Inc. ", "\x00", "a\xffb", strings.Repeat("x", 500)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, org string) {
		name := reports.ReporterName(org)
		require.True(t, utf8.ValidString(name))
		n := utf8.RuneCountInString(name)
		require.True(t, n >= 1 && n <= 100, "%d characters", n)
		require.False(t, strings.ContainsFunc(name, unicode.IsControl))
		require.Equal(t, name, reports.ReporterName(name))
	})
}

// TestSelectorInventoryFromReports: a report's passing signatures of the
// domain enter its DKIM selector inventory with their sources; a failing
// signature's selector (anyone can invent one) does not.
func TestSelectorInventoryFromReports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	forged := `<record><row><source_ip>203.0.113.66</source_ip><count>9</count><policy_evaluated><disposition>none</disposition>
<dkim>fail</dkim><spf>fail</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>
<auth_results><dkim><domain>example.com</domain><selector>forged</selector><result>fail</result></dkim></auth_results></record>`
	raw := []byte(strings.Replace(string(fromOrg("google.com", "sel-1", b.svc.Now())), "</feedback>", forged+"</feedback>", 1))
	require.Equal(t, reports.StatusAccepted, b.receive(t, d, reports.KindDMARC, raw).Status)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM dkim_selectors WHERE domain_id = $1 AND selector = 's1' AND sources = '{192.0.2.1}'", d))
	require.Zero(t, b.count(t, "SELECT count(*) FROM dkim_selectors WHERE domain_id = $1 AND selector = 'forged'", d))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dkim_selector_new'", b.account))
}
