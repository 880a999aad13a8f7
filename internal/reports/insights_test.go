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

// mixedZone gives PTRs for three known senders and the domain's own server;
// 198.51.100.66 has none.
const mixedZone = `$TTL 300
10.2.0.192.in-addr.arpa. PTR a27-10.smtp-out.amazonses.com.
20.2.0.192.in-addr.arpa. PTR o1.ptr1234.sendgrid.net.
30.2.0.192.in-addr.arpa. PTR mail-wr1-f30.google.com.
40.2.0.192.in-addr.arpa. PTR mx.example.com.
`

func record(ip string, count int, dkim, spf, spfRaw string) string {
	return fmt.Sprintf(`<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>
<auth_results><dkim><domain>example.com</domain><selector>s1</selector><result>%s</result></dkim><spf><domain>bounce.example.net</domain><result>%s</result></spf></auth_results></record>`,
		ip, count, dkim, spf, dkim, spfRaw)
}

// TestSourcesAndGuidance parses a mixed report whose sources are named by
// PTRs from a loopback DNS server, then checks categories and guidance.
func TestSourcesAndGuidance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dns := dnstest.Start(t, mixedZone)
	b.svc.Resolver = dnscheck.NewClient(dns.Addr(), time.Second)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	report := fmt.Sprintf(`<feedback><report_metadata><org_name>google.com</org_name><report_id>mixed-1</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><adkim>r</adkim><aspf>r</aspf><p>none</p></policy_published>%s</feedback>`,
		now.Add(-48*time.Hour).Unix(), now.Add(-24*time.Hour).Unix()-1, strings.Join([]string{
			record("192.0.2.10", 500, "pass", "fail", "pass"),   // Amazon SES, DKIM aligned: compliant
			record("192.0.2.20", 40, "fail", "fail", "pass"),    // SendGrid not set up: non_compliant
			record("192.0.2.30", 60, "pass", "fail", "fail"),    // relayed by Google, signature kept: forwarded
			record("192.0.2.40", 400, "fail", "pass", "pass"),   // own server: compliant
			record("198.51.100.66", 25, "fail", "fail", "fail"), // spoofing: threat_unknown
		}, ""))
	out := b.receive(t, d, reports.KindDMARC, []byte(report))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_new_source' AND payload->>'source_ip' = '198.51.100.66'", b.account),
		"an unknown source failing above the floor is announced; a known sender failing is not")
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_new_source'", b.account))

	ctx := context.Background()
	sources, err := b.svc.Sources(ctx, b.tx, d, now.Add(-30*24*time.Hour), now, reports.MaxSourcesListed)
	require.NoError(t, err)
	got := map[string]reports.Source{}
	require.False(t, sources.Truncated)
	for _, s := range sources.Sources {
		got[s.Name] = s
	}
	require.Len(t, got, 5)
	require.Equal(t, reports.CategoryCompliant, got["Amazon SES"].Category)
	require.True(t, got["Amazon SES"].Known)
	require.Equal(t, "a27-10.smtp-out.amazonses.com", got["Amazon SES"].IPs[0].PTR)
	require.Equal(t, []string{"s1"}, got["Amazon SES"].DKIMSelectors)
	require.Equal(t, reports.CategoryNonCompliant, got["Twilio SendGrid"].Category)
	require.Equal(t, reports.CategoryForwarded, got["Google (Including Gmail and Google Workspace)"].Category)
	require.Equal(t, reports.CategoryCompliant, got["example.com"].Category, "own server, named by its base domain")
	require.Equal(t, reports.CategoryThreatUnknown, got["198.51.100.66"].Category)
	require.InDelta(t, 1.0, got["Amazon SES"].DKIMAlignedRate, 1e-9)
	require.InDelta(t, 0.0, got["Amazon SES"].SPFAlignedRate, 1e-9)

	g, err := b.svc.Guidance(ctx, b.tx, d, "example.com", reports.Policy{P: "none", ADKIM: "r", ASPF: "r"}, now)
	require.NoError(t, err)
	require.Equal(t, "quarantine", g.Readiness.NextPolicy)
	require.Equal(t, int64(1025), g.Readiness.Messages)
	require.Equal(t, int64(1000), g.Readiness.LegitimateMessages, "threat/unknown volume is not legitimate")
	require.InDelta(t, 0.96, g.Readiness.CompliantShare, 1e-9)
	require.False(t, g.Readiness.Ready)
	require.Len(t, g.Fixes, 1)
	require.Equal(t, "Twilio SendGrid", g.Fixes[0].Source)
	require.Contains(t, strings.Join(g.Fixes[0].Steps, "\n"), "s1._domainkey.example.com")
	require.Contains(t, strings.Join(g.Readiness.Blockers, "\n"), "Twilio SendGrid sends 40 messages failing DMARC")

	rate, messages, err := reports.PassRate(ctx, b.tx, d, now)
	require.NoError(t, err)
	require.Equal(t, int64(1025), messages)
	require.InDelta(t, 960.0/1025.0, rate, 1e-9)
	selectors, err := reports.SelectorsSeen(ctx, b.tx, d, now)
	require.NoError(t, err)
	require.Equal(t, []string{"s1"}, selectors)
}
