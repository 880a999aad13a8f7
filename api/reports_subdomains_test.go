package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/reports"
)

// TestDMARCSubdomains: the names a domain's reports show in header_from,
// with their first and last days and 30-day volumes, as the API lists
// them; another account's domain is 404.
func TestDMARCSubdomains(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := setup(t, func(o *setupOpts) { o.now = func() time.Time { return now } })
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"

	resp := b.do(t, "GET", base+"/dmarc/subdomains", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var empty reports.SubdomainList
	resp.JSON(t, &empty)
	require.Empty(t, empty.Subdomains)
	require.Equal(t, "2025-12-03", empty.Since, "30 UTC days ending today")
	require.Equal(t, "2026-01-01", empty.Until)

	row := func(from string, count int, result string) string {
		return fmt.Sprintf(`<record><row><source_ip>192.0.2.7</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>fail</spf></policy_evaluated></row><identifiers><header_from>%s</header_from></identifiers>
<auth_results><spf><domain>example.net</domain><result>fail</result></spf></auth_results></record>`, count, result, from)
	}
	report := fmt.Sprintf(`<feedback><report_metadata><org_name>google.com</org_name><report_id>sub-1</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>%s%s%s</feedback>`,
		now.Add(-36*time.Hour).Unix(), now.Add(-12*time.Hour).Unix()-1,
		row("example.com", 40, "pass"), row("news.example.com", 8, "pass"), row("news.example.com", 2, "fail"))
	b.uploadParsed(t, acct.Key, base+"/reports", "application/octet-stream", []byte(report))

	resp = b.do(t, "GET", base+"/dmarc/subdomains", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var list reports.SubdomainList
	resp.JSON(t, &list)
	require.Len(t, list.Subdomains, 2)
	byName := map[string]reports.Subdomain{}
	for _, s := range list.Subdomains {
		byName[s.Name] = s
	}
	news := byName["news.example.com"]
	require.True(t, news.Subdomain)
	require.Equal(t, "2025-12-31", news.FirstSeen, "the report's midpoint day")
	require.Equal(t, "2025-12-31", news.LastSeen)
	require.Equal(t, int64(10), news.Messages)
	require.Equal(t, int64(8), news.Passing)
	require.InDelta(t, 0.8, news.PassRate, 1e-9)
	require.Nil(t, news.DNSExists, "not looked up yet")
	require.False(t, byName["example.com"].Subdomain, "the domain itself counts too")
	require.Equal(t, int64(40), byName["example.com"].Messages)

	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/dmarc/subdomains", other.Key, nil).Status)
}
