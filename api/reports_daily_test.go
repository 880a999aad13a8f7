package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// dmarcReportFor is an aggregate report for domain over the UTC day from
// begin: 30 messages passing from 192.0.2.1, 10 failing from 198.51.100.9.
func dmarcReportFor(domain string, begin time.Time) []byte {
	row := func(ip string, n int, result string) string {
		return fmt.Sprintf(`<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>%s</header_from></identifiers>
<auth_results><spf><domain>%s</domain><result>%s</result></spf></auth_results></record>`, ip, n, result, result, domain, domain, result)
	}
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>example.net</org_name><report_id>daily-1</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>%s</domain><p>none</p></policy_published>%s%s</feedback>`,
		begin.Unix(), begin.Add(24*time.Hour-time.Second).Unix(), domain, row("192.0.2.1", 30, "pass"), row("198.51.100.9", 10, "fail")))
}

// TestDMARCDailyVolume: an uploaded report shows on its day of the daily
// listing, by category and with its pass rate; days without reports are
// listed empty; the window is bounded; another account's domain is a 404.
func TestDMARCDailyVolume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"

	begin := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	resp := b.rptRawDo(t, "POST", base+"/reports", acct.Key, "application/octet-stream", dmarcReportFor("example.com", begin))
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var rec api.ReceivedReport
	resp.JSON(t, &rec)
	b.rptParse(t, rec.ID)

	resp = b.do(t, "GET", base+"/dmarc/daily?days=7", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var daily api.DMARCDaily
	resp.JSON(t, &daily)
	require.Len(t, daily.Days, 7)
	require.Equal(t, time.Now().UTC().Format(time.DateOnly), daily.To)
	day := begin.Format(time.DateOnly)
	for _, d := range daily.Days {
		if d.Date != day {
			require.Zero(t, d.Messages, d.Date)
			require.Nil(t, d.PassRate, "no reports, no rate")
			continue
		}
		require.Equal(t, int64(40), d.Messages)
		require.Equal(t, int64(30), d.Compliant)
		require.Equal(t, int64(10), d.ThreatUnknown, "a failing source without a known sender's name")
		require.NotNil(t, d.PassRate)
		require.InDelta(t, 0.75, *d.PassRate, 1e-9)
		day = "" // seen
	}
	require.Empty(t, day, "the report's day is listed")

	resp = b.do(t, "GET", base+"/dmarc/daily", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &daily)
	require.Len(t, daily.Days, 30, "30 days by default")
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", base+"/dmarc/daily?days=401", acct.Key, nil).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", base+"/dmarc/daily?days=0", acct.Key, nil).Status)
	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/dmarc/daily", other.Key, nil).Status)

	// The report's sender is a reporter of the domain.
	resp = b.do(t, "GET", base+"/dmarc/reporters", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var reporters []reports.Reporter
	resp.JSON(t, &reporters)
	require.Len(t, reporters, 1)
	require.Equal(t, "example.net", reporters[0].Name)
	require.Equal(t, reports.ReporterOccasional, reporters[0].Status)
	require.Equal(t, 1, reporters[0].DaysReported7)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/dmarc/reporters", other.Key, nil).Status)

	// The domain page charts the same days: volume by category (compliant,
	// forwarded, non-compliant, threat or unknown) and the pass rate, each
	// titled, described and with its table; a day without reports has no
	// rate.
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	_, page := w.req("GET", "/domains/example.com", nil)
	require.Contains(t, page, `<title id="dmarc-chart-t">DMARC messages per day by source category, last 30 days</title>`)
	require.Contains(t, page, "40 messages reported over 30 days, 75% passing DMARC, by the category of their source.")
	day = begin.Format("Jan 2")
	require.Regexp(t, `(?s)id="dmarc-chart".*?<tr><td>`+day+`</td><td>30</td><td>0</td><td>0</td><td>10</td><td></td></tr>`, page)
	// The day the report arrived is marked with what it revealed: the new
	// failing source.
	require.Regexp(t, `(?s)id="dmarc-chart".*?<tr><td>`+time.Now().UTC().Format("Jan 2")+`</td><td>0</td><td>0</td><td>0</td><td>0</td><td>New DMARC source: example.com: new source 198.51.100.9`, page)
	require.Regexp(t, `(?s)id="dmarc-pass-chart".*?<tr><td>`+day+`</td><td>75%</td><td></td></tr>`, page)
	require.Regexp(t, `(?s)id="dmarc-pass-chart".*?<tr><td>`+time.Now().UTC().Format("Jan 2")+`</td><td>—</td><td>New DMARC source`, page)
	require.Regexp(t, `(?s)id="reporters".*?<td>example.net</td><td>occasional</td>`, page)
	// The names the From header claimed: the domain itself, 40 messages.
	require.Regexp(t, `(?s)id="subdomains".*?<td>example.com</td><td>`+begin.Format(time.DateOnly)+`</td><td>40</td><td>75.0%</td><td>—</td>`, page)
}
