package reports_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// fromRecord is a record of count messages claiming headerFrom, passing
// DMARC (aligned DKIM) or failing it.
func fromRecord(headerFrom string, count int, pass bool) string {
	result := "fail"
	if pass {
		result = "pass"
	}
	return fmt.Sprintf(`<record><row><source_ip>192.0.2.7</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>fail</spf></policy_evaluated></row><identifiers><header_from>%s</header_from></identifiers>
<auth_results><spf><domain>bounce.example.net</domain><result>fail</result></spf></auth_results></record>`, count, result, headerFrom)
}

func (b *testBundle) subdomainEvents(t *testing.T) map[string]int64 {
	t.Helper()
	return sumsOf(t, b, `SELECT payload->>'subdomain', count(*)::bigint FROM events
		WHERE account_id = $1 AND event_type = 'dmarc_new_subdomain' GROUP BY 1`, b.account)
}

// TestNewSubdomainEvents drives dmarc_new_subdomain from reports on a fixed
// clock: the domain's first report sets its baseline without events; a
// later report claiming a subdomain never seen raises it once, with its
// first day, volume and pass rate; the next report claiming it again does
// not; the domain itself and names outside it never do; a report raises
// at most 10.
func TestNewSubdomainEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	receive := func(id string, records ...string) {
		out := b.receive(t, d, reports.KindDMARC, aggregate(now, id, records...))
		require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	}

	receive("baseline", fromRecord("example.com", 50, true), fromRecord("mail.example.com", 10, true))
	require.Empty(t, b.subdomainEvents(t), "the first report is the baseline")
	require.Equal(t, int64(2), b.count(t, "SELECT count(*) FROM dmarc_subdomains WHERE domain_id = $1", d))

	receive("new", fromRecord("Example.COM.", 20, true), fromRecord("mail.example.com", 5, true),
		fromRecord("billing.example.com", 30, false), fromRecord("billing.example.com", 10, true),
		fromRecord("evil.example.org", 7, false))
	require.Equal(t, map[string]int64{"billing.example.com": 1}, b.subdomainEvents(t))
	var payload map[string]any
	var severity string
	require.NoError(t, b.tx.QueryRow(context.Background(), `SELECT payload, severity FROM events
		WHERE account_id = $1 AND event_type = 'dmarc_new_subdomain'`, b.account).Scan(&payload, &severity))
	require.Equal(t, "2025-12-30", payload["first_seen"], "the report's day")
	require.EqualValues(t, 40, payload["messages"])
	require.EqualValues(t, 10, payload["passing"])
	require.InDelta(t, 0.25, payload["pass_rate"], 1e-9)
	require.Equal(t, "warning", severity, "mostly failing")

	receive("again", fromRecord("billing.example.com", 3, false), fromRecord("example.com", 4, true))
	require.Equal(t, map[string]int64{"billing.example.com": 1}, b.subdomainEvents(t), "seen before: no second event")

	counted := sumsOf(t, b, `SELECT header_from, sum(messages)::bigint FROM dmarc_header_from_days WHERE domain_id = $1 GROUP BY 1`, d)
	require.Equal(t, map[string]int64{"example.com": 74, "mail.example.com": 15, "billing.example.com": 43}, counted,
		"normalised, the domain itself counted, a name outside it not")
	require.Equal(t, int64(50+10+20+5+10+4), b.count(t, "SELECT sum(passing) FROM dmarc_header_from_days WHERE domain_id = $1", d))

	var many []string
	for i := range 15 {
		many = append(many, fromRecord(fmt.Sprintf("s%02d.example.com", i), 100-i, false))
	}
	receive("many", many...)
	events := b.subdomainEvents(t)
	require.Len(t, events, 11, "at most 10 a report")
	require.Contains(t, events, "s00.example.com", "busiest first")
	require.NotContains(t, events, "s14.example.com")
	require.NotContains(t, events, "example.com")
	require.Equal(t, int64(2+1+15), b.count(t, "SELECT count(*) FROM dmarc_subdomains WHERE domain_id = $1", d),
		"every new name is known, announced or not")
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'dmarc_subdomain_lookup' AND args->>'domain_id' = $1", d.String()),
		"one lookup job waits per domain")
}

// TestKnownSubdomainsBounded: a domain knows at most MaxKnownSubdomains
// names; past it new names are neither known, counted nor announced.
func TestKnownSubdomainsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	_, err := b.tx.Exec(context.Background(), `INSERT INTO dmarc_subdomains (domain_id, name, first_seen, last_seen, first_messages, first_passing)
		SELECT $1, 'k' || g || '.example.com', '2025-01-01', '2025-01-01', 1, 1 FROM generate_series(1, $2::int) g`, d, reports.MaxKnownSubdomains-1)
	require.NoError(t, err)
	out := b.receive(t, d, reports.KindDMARC, aggregate(b.svc.Now(), "full",
		fromRecord("a.example.com", 30, false), fromRecord("b.example.com", 20, false), fromRecord("k1.example.com", 5, true)))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, int64(reports.MaxKnownSubdomains), b.count(t, "SELECT count(*) FROM dmarc_subdomains WHERE domain_id = $1", d))
	require.Equal(t, map[string]int64{"a.example.com": 1}, b.subdomainEvents(t))
	require.Equal(t, map[string]int64{"a.example.com": 30, "k1.example.com": 5},
		sumsOf(t, b, `SELECT header_from, sum(messages)::bigint FROM dmarc_header_from_days WHERE domain_id = $1 GROUP BY 1`, d))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM dmarc_subdomains WHERE domain_id = $1 AND name = 'k1.example.com' AND last_seen = '2025-12-30'", d))
}

// TestLookUpSubdomains: the lookup job's rule (NXDOMAIN: does not exist;
// an answer or NODATA: exists; a failure: unknown), bounded per run, and
// what the DNS recommendations then read.
func TestLookUpSubdomains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zone := dnstest.Start(t, `$TTL 300
mail.example.com. A 192.0.2.1
txt.example.com. TXT "v=spf1 -all"
`)
	zone.ServFail("broken.example.com")
	b.svc.Resolver = dnscheck.NewClient(zone.Addr(), time.Second)
	d := b.domain(t, "example.com")
	now := b.svc.Now()
	for i, recs := range [][]string{
		{fromRecord("example.com", 10, true)},
		{fromRecord("mail.example.com", 5, true), fromRecord("txt.example.com", 4, true),
			fromRecord("billing.example.com", 30, false), fromRecord("broken.example.com", 2, false)},
	} {
		out := b.receive(t, d, reports.KindDMARC, aggregate(now, fmt.Sprintf("r%d", i), recs...))
		require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	}
	looked, missing, err := b.svc.LookUpSubdomains(context.Background(), d, "example.com")
	require.NoError(t, err)
	require.Equal(t, 4, looked, "the domain itself is not looked up")
	require.Equal(t, 1, missing)
	require.Equal(t, map[string]int64{"mail.example.com": 1, "txt.example.com": 1, "billing.example.com": 0},
		sumsOf(t, b, `SELECT name, dns_exists::int::bigint FROM dmarc_subdomains WHERE domain_id = $1 AND dns_exists IS NOT NULL`, d))
	require.Zero(t, zone.QueriesFor("example.com."))

	looked, _, err = b.svc.LookUpSubdomains(context.Background(), d, "example.com")
	require.NoError(t, err)
	require.Zero(t, looked, "answers are kept for SubdomainRecheck")

	in, err := b.svc.DNSInputs(context.Background(), b.tx, d, "example.com", nil, now)
	require.NoError(t, err)
	require.Len(t, in.Nonexistent, 1)
	require.Equal(t, "billing.example.com", in.Nonexistent[0].Name)
	require.Equal(t, int64(30), in.Nonexistent[0].Messages)
	require.Zero(t, in.Nonexistent[0].Passing)

	// The guidance says the same as the DNS recommendation would.
	g, err := b.svc.Guidance(context.Background(), b.tx, d, "example.com", reports.Policy{P: "none"}, now)
	require.NoError(t, err)
	require.Equal(t, "reject", g.NP.Propose)
	require.Contains(t, g.NP.Why, "billing.example.com: 30 messages, 0% passing DMARC")
	require.Equal(t, []reports.NonexistentSubdomain{{Name: "billing.example.com", Messages: 30}}, g.NP.Subdomains)
	for _, p := range []reports.Policy{{P: "reject"}, {P: "none", SP: "reject"}, {P: "none", NP: "quarantine"}, {}} {
		g, err = b.svc.Guidance(context.Background(), b.tx, d, "example.com", p, now)
		require.NoError(t, err)
		require.Empty(t, g.NP.Propose, "%+v", p)
		require.Len(t, g.NP.Subdomains, 1)
	}
}

func TestHeaderFroms(t *testing.T) {
	t.Parallel()
	got := reports.HeaderFroms([]dmarcrpt.Record{
		{Count: 5, HeaderFrom: "Mail.Example.COM.", DKIM: "pass"},
		{Count: 3, HeaderFrom: "mail.example.com", SPF: "pass"},
		{Count: 8, HeaderFrom: "example.com"},
		{Count: 8, HeaderFrom: "a.example.com"},
		{Count: 9, HeaderFrom: "notexample.com"},
		{Count: 9, HeaderFrom: "192.0.2.1"},
		{Count: 9, HeaderFrom: "bad_name!.example.com"},
		{Count: 0, HeaderFrom: "zero.example.com"},
	}, "example.com")
	require.Equal(t, []reports.HeaderFrom{
		{Name: "example.com", Messages: 8},
		{Name: "a.example.com", Messages: 8},
		{Name: "mail.example.com", Messages: 8, Passing: 8},
	}, got, "normalised, within the domain, the domain first among equals")

	var many []dmarcrpt.Record
	for i := range 3 * reports.MaxReportSubdomains {
		many = append(many, dmarcrpt.Record{Count: int64(i + 1), HeaderFrom: fmt.Sprintf("d%d.example.com", i)})
	}
	got = reports.HeaderFroms(many, "example.com")
	require.Len(t, got, reports.MaxReportSubdomains)
	require.Equal(t, fmt.Sprintf("d%d.example.com", 3*reports.MaxReportSubdomains-1), got[0].Name, "busiest first")
}

// FuzzHeaderFroms: whatever a report's header_from names, the keys are at
// most MaxReportSubdomains normalised names within the domain, passing
// never above messages.
func FuzzHeaderFroms(f *testing.F) {
	f.Add("Mail.Example.COM.", "pass", int64(3))
	f.Add("xn--bcher-kva.example.com", "fail", int64(1))
	f.Add("bücher.example.com", "", int64(-1))
	f.Add("example.com.example.org", "pass", int64(2))
	f.Fuzz(func(t *testing.T, headerFrom, dkim string, count int64) {
		got := reports.HeaderFroms([]dmarcrpt.Record{{Count: count, HeaderFrom: headerFrom, DKIM: dkim}, {Count: 1, HeaderFrom: headerFrom}}, "example.com")
		require.LessOrEqual(t, len(got), reports.MaxReportSubdomains)
		for _, h := range got {
			n, err := domainname.Normalize(h.Name)
			require.NoError(t, err)
			require.Equal(t, n, h.Name)
			require.True(t, h.Name == "example.com" || strings.HasSuffix(h.Name, ".example.com"), h.Name)
			require.Positive(t, h.Messages)
			require.LessOrEqual(t, h.Passing, h.Messages)
		}
	})
}
