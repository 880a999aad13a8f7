package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
)

// DMARC traffic of the measured account: the busy domain gets
// historyBusyDMARCShare of its records, from historyBusyOrgs reporting
// organisations a day; every other domain gets a report a day from two.
const (
	historyBusyDMARCShare = 0.3
	historyBusyOrgs       = 8
	historyOtherOrgs      = 2
)

// seedHistoryDMARCDomains fills mwbench_domains: per domain, how many
// organisations send it a daily aggregate report, the mean records per
// report and its pool of source IPs (the busy domain's 1,000 per S,
// which the others' smaller pools overlap: shared senders).
func seedHistoryDMARCDomains(ctx context.Context, env *benchEnv, accounts []historyAccount, size historySize) error {
	t := historyDMARCRecordsS * size.Factor
	days := float64(historySpanDays)
	busyPool := max(50, int(1000*size.Factor))
	rank := 0
	for n, a := range accounts {
		for i, id := range a.Domains {
			orgs, base, pool := historyOtherOrgs, 0.0, max(5, int(20*size.Factor))
			switch {
			case n == 0 && i == 0:
				orgs, base, pool = historyBusyOrgs, historyBusyDMARCShare*t/(days*historyBusyOrgs), busyPool
			case n == 0:
				base = (1 - historyBusyDMARCShare) * t / (float64(len(a.Domains)-1) * days * historyOtherOrgs)
			default:
				base, pool = a.Share*t/(float64(len(a.Domains))*days*historyOtherOrgs), max(5, int(40*size.Factor))
			}
			off := 0
			if rank > 0 {
				off = (rank * 37) % busyPool
			}
			if _, err := env.Pool.Exec(ctx, `INSERT INTO mwbench_domains VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				rank, a.ID, id, a.Names[i], orgs, base, pool, off); err != nil {
				return err
			}
			rank++
		}
	}
	// Reverse DNS of the pool, as the parse job caches it: six IPs in ten
	// belong to known senders or the domain's own servers, the rest have
	// no PTR.
	_, err := env.Pool.Exec(ctx, `INSERT INTO source_ptrs (ip, ptr, resolved_at)
		SELECT mwbench_ip(k), CASE k % 10 WHEN 0 THEN 'o' || k || '.ptr' || (k % 97) || '.sendgrid.net'
			WHEN 1 THEN 'a' || k || '-1.smtp-out.amazonses.com' WHEN 2 THEN 'mail-' || k || '.google.com'
			WHEN 3 THEN 'mail-' || k || '.outbound.protection.outlook.com' WHEN 4 THEN 'mail' || k || '.mcsv.net'
			WHEN 5 THEN 'mx' || k || '.busy.example.com' ELSE '' END, now()
		FROM generate_series(0, $1::int - 1) AS k`, busyPool+64)
	return err
}

// historyDMARCReportsSQL writes the aggregate reports of the days $1..$2
// as the parse job stores them: the received message (accepted, raw bytes
// dropped), the report with its totals, and its records. Known senders
// mostly pass (some forwarded: DKIM only, SPF failed), unknown IPs mostly
// fail.
const historyDMARCReportsSQL = `
WITH rep AS MATERIALIZED (
  SELECT d.rank, d.account_id, d.domain_id, d.name, d.pool, d.pool_off, o.oi, o.org, o.email, day::date AS day, x.received,
         mwbench_uuidv7(x.received, 'rm' || d.rank || ':' || day::date || ':' || o.oi) AS message_id,
         mwbench_uuidv7(x.received + interval '2 seconds', 'dr' || d.rank || ':' || day::date || ':' || o.oi) AS id,
         greatest(1, floor(d.rec_base * (0.5 + random()) + random()))::int AS nrec
  FROM mwbench_domains d
  CROSS JOIN generate_series($1::date, $2::date, interval '1 day') AS day
  JOIN mwbench_orgs o ON o.oi < d.orgs
  CROSS JOIN LATERAL (SELECT least(day + interval '1 day' + (o.oi * 47 + d.rank % 60) * interval '1 minute',
                                   $3::timestamptz - interval '1 minute') AS received) x
),
recs AS MATERIALIZED (
  SELECT rep.id AS report_id, g AS ordinal, rep.name, mwbench_ip(kk.k) AS ip, kk.k % 10 < 6 AS known, v.dkim, v.spf, v.cnt,
         's' || (1 + kk.k % 2) AS selector
  FROM rep, generate_series(1, rep.nrec) AS g,
  LATERAL (SELECT rep.pool_off + floor(rep.pool * power(random(), 3))::int AS k, g AS correlated) kk,
  LATERAL (SELECT CASE WHEN r < 0.92 AND kk.k % 10 < 6 OR r < 0.3 THEN 'pass' ELSE 'fail' END AS dkim,
                  CASE WHEN r < 0.85 AND kk.k % 10 < 6 OR r < 0.3 THEN 'pass' ELSE 'fail' END AS spf,
                  1 + floor(40 * power(r3, 3))::bigint AS cnt
           FROM (SELECT random() AS r, random() AS r3, g AS correlated, kk.k AS correlated2) z) v
),
msgs AS (
  INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw_size, status, report_type, received_at, parsed_at)
  SELECT message_id, account_id, domain_id, 'dmarc', 'smtp', 1500 + nrec * 350, 'accepted', 'aggregate', received,
         received + interval '2 seconds'
  FROM rep ORDER BY received, message_id
),
tot AS (
  SELECT report_id, count(*) AS n, sum(cnt) AS messages, coalesce(sum(cnt) FILTER (WHERE dkim = 'pass' OR spf = 'pass'), 0) AS pass
  FROM recs GROUP BY report_id
),
reps AS (
  INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at, policy_domain, policy,
      version, record_count, message_count, pass_count, created_at)
  SELECT rep.id, rep.domain_id, rep.message_id, rep.org, rep.day || '-' || rep.oi || '-' || rep.rank, rep.email,
         rep.day::timestamp AT TIME ZONE 'UTC', (rep.day::timestamp + interval '1 day' - interval '1 second') AT TIME ZONE 'UTC',
         rep.name, replace($4, '__DOMAIN__', rep.name)::jsonb, '1.0', tot.n, tot.messages, tot.pass, rep.received + interval '2 seconds'
  FROM rep JOIN tot ON tot.report_id = rep.id
  ORDER BY rep.received, rep.id
)
INSERT INTO dmarc_records (report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from, envelope_from,
    envelope_to, reasons, dkim_results, spf_results)
SELECT report_id, ordinal, ip, cnt, 'none', dkim, spf, name, CASE WHEN known THEN 'bounce.' || name ELSE 'bulk-sender.example' END,
       '', '[]',
       jsonb_build_array(jsonb_build_object('domain', CASE WHEN known THEN name ELSE 'bulk-sender.example' END,
           'selector', selector, 'result', dkim)),
       jsonb_build_array(jsonb_build_object('domain', CASE WHEN known THEN 'bounce.' || name ELSE 'bulk-sender.example' END,
           'scope', 'mfrom', 'result', spf))
FROM recs ORDER BY report_id, ordinal`

// historySourceDaysSQL derives dmarc_source_days from the stored records
// of the reports that began in [$1, $2), by the rules internal/reports
// applies at ingest (classify, reportDays, addDays): per domain, UTC day
// of the report's midpoint (daily reports) and source IP, the messages
// with aligned DKIM, aligned SPF, compliant (aligned SPF or DKIM),
// forwarded (aligned DKIM while SPF itself failed: no SPF result passed)
// and failing, and the DKIM selectors seen with d= the domain.
// TestHistorySourceDaysMatchIngest checks it against reports.Service.Parse.
const historySourceDaysSQL = `
WITH rec AS MATERIALIZED (
  SELECT r.domain_id, ((r.begin_at + (r.end_at - r.begin_at) / 2) AT TIME ZONE 'UTC')::date AS day, c.source_ip, c.count,
         c.dkim = 'pass' AS dkim_ok, c.spf = 'pass' AS spf_ok,
         EXISTS (SELECT 1 FROM jsonb_array_elements(c.spf_results) s WHERE s->>'result' = 'pass') AS spf_passed,
         ARRAY(SELECT DISTINCT lower(k->>'selector') FROM jsonb_array_elements(c.dkim_results) k
               WHERE k->>'domain' = dm.name AND coalesce(k->>'selector', '') <> '') AS sels
  FROM dmarc_reports r JOIN domains dm ON dm.id = r.domain_id JOIN dmarc_records c ON c.report_id = r.id
  WHERE r.begin_at >= $1 AND r.begin_at < $2 AND ($3::uuid IS NULL OR r.domain_id = $3)
),
cnt AS (
  SELECT domain_id, day, source_ip, sum(count) AS messages,
         coalesce(sum(count) FILTER (WHERE dkim_ok), 0) AS dkim_aligned,
         coalesce(sum(count) FILTER (WHERE spf_ok), 0) AS spf_aligned,
         coalesce(sum(count) FILTER (WHERE (dkim_ok OR spf_ok) AND NOT (dkim_ok AND NOT spf_ok AND NOT spf_passed)), 0) AS compliant,
         coalesce(sum(count) FILTER (WHERE dkim_ok AND NOT spf_ok AND NOT spf_passed), 0) AS forwarded,
         coalesce(sum(count) FILTER (WHERE NOT dkim_ok AND NOT spf_ok), 0) AS failing
  FROM rec GROUP BY 1, 2, 3
),
sel AS (
  SELECT domain_id, day, source_ip, array_agg(DISTINCT s ORDER BY s) AS sels
  FROM rec, unnest(rec.sels) AS s GROUP BY 1, 2, 3
)
INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing,
    dkim_selectors)
SELECT cnt.domain_id, cnt.day, cnt.source_ip, cnt.messages, cnt.dkim_aligned, cnt.spf_aligned, cnt.compliant, cnt.forwarded,
       cnt.failing, coalesce(sel.sels, '{}')
FROM cnt LEFT JOIN sel USING (domain_id, day, source_ip)
ORDER BY cnt.day, cnt.domain_id, cnt.source_ip`

// seedHistoryDMARC writes the reports of the historySpanDays days before
// the seeding's day (a day's reports arrive the next day), a chunk of days
// per statement, then their daily source rows.
func seedHistoryDMARC(ctx context.Context, env *benchEnv, seed *historySeed) error {
	policy, err := json.Marshal(dmarcrpt.PolicyPublished{Domain: "__DOMAIN__", ADKIM: "r", ASPF: "r", P: "none"})
	if err != nil {
		return err
	}
	perDay := historyDMARCRecordsS * seed.Size.Factor * (1 + historyNoiseAccounts*historyNoiseShare) / historySpanDays
	step := max(1, min(historySpanDays, int(math.Floor(historyStatementRows/perDay))))
	last := seed.Now.Truncate(24*time.Hour).AddDate(0, 0, -1)
	for from := last.AddDate(0, 0, 1-historySpanDays); !from.After(last); from = from.AddDate(0, 0, step) {
		to := minTime(from.AddDate(0, 0, step-1), last)
		if _, err := env.Pool.Exec(ctx, historyDMARCReportsSQL, from, to, seed.Now, string(policy)); err != nil {
			return fmt.Errorf("error seeding DMARC reports: %w", err)
		}
		if _, err := env.Pool.Exec(ctx, historySourceDaysSQL, from, to.AddDate(0, 0, 1), nil); err != nil {
			return fmt.Errorf("error deriving daily source rows: %w", err)
		}
	}
	return nil
}
