package reports_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/schema"
)

// recountAuthDomains recounts a domain's return-path and DKIM signing
// domains from its stored records (each record once per distinct name and
// kind), as "kind name" -> messages. The fixtures' names are ASCII, so lower
// case and no trailing dot is their normal form; names without a dot (empty
// ones) are not domains.
const recountAuthDomains = `
WITH names AS (
    SELECT r.report_id, r.ordinal, r.count, 'return_path' AS kind, lower(rtrim(r.envelope_from, '.')) AS name
    FROM dmarc_records r JOIN dmarc_reports p ON p.id = r.report_id WHERE p.domain_id = $1
    UNION
    SELECT r.report_id, r.ordinal, r.count, 'return_path', lower(rtrim(s ->> 'domain', '.'))
    FROM dmarc_records r JOIN dmarc_reports p ON p.id = r.report_id, jsonb_array_elements(r.spf_results) s
    WHERE p.domain_id = $1 AND coalesce(lower(s ->> 'scope'), '') IN ('', 'mfrom')
    UNION
    SELECT r.report_id, r.ordinal, r.count, 'dkim', lower(rtrim(k ->> 'domain', '.'))
    FROM dmarc_records r JOIN dmarc_reports p ON p.id = r.report_id, jsonb_array_elements(r.dkim_results) k
    WHERE p.domain_id = $1
)
SELECT kind || ' ' || name, sum(count)::bigint FROM names WHERE name LIKE '%.%' GROUP BY 1`

func sumsOf(t *testing.T, b *testBundle, sql string, args ...any) map[string]int64 {
	t.Helper()
	rows, err := b.tx.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestAuthDomainCountersEqualRecount: the daily counters of return-path and
// DKIM signing domains, written at ingest, equal a recount from the stored
// records, report after report (a duplicate adds nothing), spread over a
// report's days as the source days are.
func TestAuthDomainCountersEqualRecount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	for _, f := range []string{
		"dmarc/addisonfoods.com!example.com!1536105600!1536191999.xml",
		"dmarc/rfc9990-example.net!example.com!1700000000!1700086399.xml",
		"dmarc/protection.outlook.com!example.com!1711756800!1711843200.xml",
		"dmarc/!large-example.com!1711897200!1711983600.xml",
		"dmarc/addisonfoods.com!example.com!1536105600!1536191999.xml", // duplicate
		"dmarc/aggregate_invalid/report_with_upper_cased_pass.xml",     // four days
	} {
		out := b.receive(t, d, reports.KindDMARC, corpus.Read(t, f))
		require.Contains(t, []string{reports.StatusAccepted, reports.StatusDuplicate}, out.Status, "%s: %s", f, out.Reason)
	}
	counted := sumsOf(t, b, `SELECT kind || ' ' || auth_domain, sum(messages)::bigint FROM dmarc_auth_domain_days
		WHERE domain_id = $1 GROUP BY 1`, d)
	require.Equal(t, sumsOf(t, b, recountAuthDomains, d), counted)
	require.Equal(t, int64(1), counted["dkim toptierhighticket.club"], "a DKIM d= domain of another organisation")
	require.Equal(t, int64(2), counted["return_path spoofed.example.com"], "its one record counts 2 messages")
	require.Positive(t, b.count(t, `SELECT count(DISTINCT day) FROM dmarc_auth_domain_days WHERE domain_id = $1
		AND day BETWEEN '2019-11-28' AND '2019-12-02'`, d), "the four-day report is spread")
}

func TestAuthDomains(t *testing.T) {
	t.Parallel()
	got := reports.AuthDomains([]dmarcrpt.Record{
		{Count: 5, EnvelopeFrom: "Bounce.Example.COM.", SPFResults: []dmarcrpt.SPFAuthResult{
			{Domain: "bounce.example.com", Scope: "mfrom"}, {Domain: "mail-host.example.net", Scope: "helo"}},
			DKIMResults: []dmarcrpt.DKIMAuthResult{{Domain: "esp.example"}, {Domain: "ESP.example"}, {Domain: "192.0.2.1"}}},
		{Count: 2, EnvelopeFrom: "user@esp.example", DKIMResults: []dmarcrpt.DKIMAuthResult{{Domain: "com"}, {Domain: "bad_name!.example"}}},
		{Count: 0, EnvelopeFrom: "zero.example"},
	})
	require.Equal(t, []reports.AuthDomain{
		{Kind: reports.AuthDKIM, Domain: "esp.example", Messages: 5},
		{Kind: reports.AuthReturnPath, Domain: "bounce.example.com", Messages: 5},
		{Kind: reports.AuthReturnPath, Domain: "esp.example", Messages: 2},
	}, got, "normalised, once per record, no HELO name, IP, public suffix or junk")

	var many []dmarcrpt.Record
	for i := range 3 * reports.MaxReportAuthDomains {
		many = append(many, dmarcrpt.Record{Count: int64(i + 1), EnvelopeFrom: fmt.Sprintf("d%d.example", i)})
	}
	got = reports.AuthDomains(many)
	require.Len(t, got, reports.MaxReportAuthDomains)
	require.Equal(t, fmt.Sprintf("d%d.example", 3*reports.MaxReportAuthDomains-1), got[0].Domain, "busiest first")
}

// FuzzAuthDomains: whatever a report's names, the keys are at most
// MaxReportAuthDomains normalised domain names with positive counts.
func FuzzAuthDomains(f *testing.F) {
	f.Add("example.com", "mfrom", "bounce.example.com", "esp.example", int64(3))
	f.Add("user@EXAMPLE.com.", "", "xn--bcher-kva.example", "Bücher.example", int64(1))
	f.Add("", "helo", "192.0.2.1", "co.uk", int64(-1))
	f.Fuzz(func(t *testing.T, envelope, scope, spf, dkim string, count int64) {
		recs := []dmarcrpt.Record{{Count: count, EnvelopeFrom: envelope,
			SPFResults:  []dmarcrpt.SPFAuthResult{{Domain: spf, Scope: scope}},
			DKIMResults: []dmarcrpt.DKIMAuthResult{{Domain: dkim}, {Domain: envelope}}}}
		got := reports.AuthDomains(recs)
		require.LessOrEqual(t, len(got), reports.MaxReportAuthDomains)
		for _, a := range got {
			n, err := domainname.Normalize(a.Domain)
			require.NoError(t, err)
			require.Equal(t, n, a.Domain)
			require.Positive(t, a.Messages)
			require.Contains(t, []string{reports.AuthReturnPath, reports.AuthDKIM}, a.Kind)
		}
	})
}

// TestAuthDomainBackfill: schema 0044 counts the reports stored before it
// by the rule ingest applies (AuthDomains), for reports of the last 15
// days: its SQL and the Go rule agree on the same records.
func TestAuthDomainBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	d := testfactory.AccountDomain(t, pool, "backfill.example")
	records := []dmarcrpt.Record{
		{Count: 5, EnvelopeFrom: "User@Bounce.Example.COM.", SPFResults: []dmarcrpt.SPFAuthResult{
			{Domain: "bounce.example.com", Scope: "mfrom"}, {Domain: "helo.example.net", Scope: "helo"}},
			DKIMResults: []dmarcrpt.DKIMAuthResult{{Domain: "esp.example"}, {Domain: "ESP.example"}, {Domain: "192.0.2.1"}}},
		{Count: 2, EnvelopeFrom: "esp.example", DKIMResults: []dmarcrpt.DKIMAuthResult{{Domain: "bad_name!.example"}, {Domain: "1.2.3.4"}}},
	}
	for i, days := range []int{1, 30} { // the second report is older than the window
		report := uuid.Must(uuid.NewV7())
		_, err := pool.Exec(ctx, `INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw, raw_size)
			VALUES ($1, $2, $3, 'dmarc', 'upload', '\x01', 1)`, report, d.AccountID, d.ID)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at,
			policy_domain, policy, version, record_count, message_count, pass_count)
			VALUES ($1, $2, $1, 'org', $3, 'x@org.example', now() - make_interval(days => $4 + 1), now() - make_interval(days => $4),
			'backfill.example', '{}', '1.0', 2, 7, 0)`, report, d.ID, fmt.Sprint(i), days)
		require.NoError(t, err)
		for j, r := range records {
			dkim, _ := json.Marshal(r.DKIMResults)
			spf, _ := json.Marshal(r.SPFResults)
			_, err := pool.Exec(ctx, `INSERT INTO dmarc_records (report_id, ordinal, source_ip, count, disposition, dkim, spf,
				header_from, envelope_from, envelope_to, reasons, dkim_results, spf_results)
				VALUES ($1, $2, '192.0.2.1', $3, 'none', 'fail', 'fail', 'backfill.example', $4, '', '[]', $5, $6)`,
				report, j, r.Count, r.EnvelopeFrom, string(dkim), string(spf))
			require.NoError(t, err)
		}
	}
	raw, err := fs.ReadFile(schema.FS, "0044_reputation_watch.sql")
	require.NoError(t, err)
	stmt := string(raw)[strings.Index(string(raw), "INSERT INTO dmarc_auth_domain_days"):]
	_, err = pool.Exec(ctx, stmt)
	require.NoError(t, err)

	want := map[string]int64{}
	for _, a := range reports.AuthDomains(records) {
		want[a.Kind+" "+a.Domain] = a.Messages
	}
	rows, err := pool.Query(ctx, `SELECT kind || ' ' || auth_domain, messages FROM dmarc_auth_domain_days WHERE domain_id = $1`, d.ID)
	require.NoError(t, err)
	got := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		require.NoError(t, rows.Scan(&k, &n))
		got[k] += n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got, "the same names and counts; the old report left out")
}
