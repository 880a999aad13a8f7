package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/partitions"
)

// historyRows counts what a size's seeding wrote (every account).
type historyRows struct {
	MessageEvents, Payloads, Events, Deliveries, Attempts, DMARCReports, DMARCRecords, SourceDays int64
}

func (r historyRows) String() string {
	return fmt.Sprintf("%d message events, %d provider payloads, %d events, %d webhook deliveries, %d attempts, "+
		"%d DMARC reports with %d records (%d daily source rows)", r.MessageEvents, r.Payloads, r.Events,
		r.Deliveries, r.Attempts, r.DMARCReports, r.DMARCRecords, r.SourceDays)
}

// historyStatementRows is about how many rows one seeding statement writes.
const historyStatementRows = 1_000_000

// seedHistory creates the measured account through the API, signs it in
// to the dashboard, and seeds the size: each table in the order production
// writes it, by INSERT ... SELECT over generate_series, about a million
// rows per statement, then VACUUM ANALYZE.
func seedHistory(ctx context.Context, env *benchEnv, srv *historyServer, size historySize) (*historySeed, error) {
	seed := &historySeed{Size: size, Now: time.Now().UTC().Truncate(time.Millisecond)}
	id, key, err := createAccount(ctx, srv.Base, "history@bench.example")
	if err != nil {
		return nil, err
	}
	seed.Account, seed.Key = uuid.MustParse(id), key
	if seed.Cookie, err = dashboardSession(ctx, srv.Base, "history@bench.example", "benchmark password"); err != nil {
		return nil, err
	}
	if _, err := seedHistorySetup(ctx, env, seed); err != nil {
		return nil, err
	}
	if err := seedHistoryPartitions(ctx, env, seed.Now); err != nil {
		return nil, err
	}
	total := func(n int) int { return int(float64(n) * size.Factor * (1 + historyNoiseAccounts*historyNoiseShare)) }
	steps := []struct {
		name string
		run  func() error
	}{
		{"message events and payloads", func() error {
			return seedHistoryMessages(ctx, env, historyDays(seed.Now, total(historyMessageEventsS)))
		}},
		{"events and deliveries", func() error {
			return seedHistoryEvents(ctx, env, seed, historyDays(seed.Now, total(historyEventsS)))
		}},
		{"DMARC reports", func() error { return seedHistoryDMARC(ctx, env, seed) }},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := s.run(); err != nil {
			return nil, fmt.Errorf("error seeding %s: %w", s.name, err)
		}
		fmt.Printf("seeded    %s in %s\n", s.name, time.Since(t0).Round(time.Second))
	}
	if _, err := env.Pool.Exec(ctx, historyDropHelpersSQL); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := env.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return nil, err
	}
	fmt.Printf("seeded    VACUUM ANALYZE in %s\n", time.Since(t0).Round(time.Second))
	err = env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_events), (SELECT count(*) FROM provider_payloads),
		(SELECT count(*) FROM events), (SELECT count(*) FROM webhook_deliveries), (SELECT count(*) FROM webhook_delivery_attempts),
		(SELECT count(*) FROM dmarc_reports), (SELECT count(*) FROM dmarc_records), (SELECT count(*) FROM dmarc_source_days)`).Scan(
		&seed.Rows.MessageEvents, &seed.Rows.Payloads, &seed.Rows.Events, &seed.Rows.Deliveries, &seed.Rows.Attempts,
		&seed.Rows.DMARCReports, &seed.Rows.DMARCRecords, &seed.Rows.SourceDays)
	if err != nil {
		return nil, err
	}
	var rows, ips, records int64
	err = env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM dmarc_source_days s WHERE s.domain_id = d.id AND s.day >= $2::date - 30),
		(SELECT count(DISTINCT source_ip) FROM dmarc_source_days s WHERE s.domain_id = d.id AND s.day >= $2::date - 30),
		(SELECT count(*) FROM dmarc_records c JOIN dmarc_reports r ON r.id = c.report_id WHERE r.domain_id = d.id)
		FROM domains d WHERE d.account_id = $1 AND d.name = $3`, seed.Account, seed.Now, seed.Busy).Scan(&rows, &ips, &records)
	fmt.Printf("seeded    busy domain %s: %d DMARC records; its last 30 days: %d daily source rows, %d source IPs\n", seed.Busy, records, rows, ips)
	return seed, err
}

// seedHistoryPartitions creates the partitions of the seeded span before
// any row is written, as the hourly partition maintenance would have made
// them while that history arrived: from the interval of the oldest row on
// (Ensure at the oldest time, then again at now, which fills every
// interval between), so that each week, day or month lands in its own
// partition and retention can drop it whole.
func seedHistoryPartitions(ctx context.Context, env *benchEnv, now time.Time) error {
	oldest := now.Add(-historySpanDays * 24 * time.Hour)
	var rep partitions.Report
	for _, spec := range partitions.Tables {
		for _, at := range []time.Time{oldest, now} {
			if err := partitions.Ensure(ctx, env.Pool, spec, at, &rep); err != nil {
				return fmt.Errorf("partitions of %s: %w", spec.Table, err)
			}
		}
	}
	if len(rep.Skipped) > 0 {
		return fmt.Errorf("partitions not created (lock timeout): %s", strings.Join(rep.Skipped, ", "))
	}
	fmt.Printf("seeded    %d partitions\n", len(rep.Created))
	return nil
}

// historyPayloadsSQL writes a chunk's provider payloads: one per
// historyEventsPerPayload message events of a day, received two seconds
// after the last of them, already processed, in the slot (account,
// provider) its hash names. Bodies are about 1.2 KB of JSON (stored inline:
// under TOAST's threshold).
const historyPayloadsSQL = `
INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body, received_at, processed_at, events, attempts)
SELECT mwbench_uuidv7(p.at, 'p' || d.di || ':' || g), s.provider_id, s.account_id,
       md5('r' || d.di || ':' || g) || md5('k' || d.di || ':' || g), sha256(b.body), b.body, p.at, p.at + interval '1 second',
       least(10, d.n - g * 10), 1
FROM ` + historyDaysSQL + `, generate_series(0, (d.n - 1) / 10) AS g,
     LATERAL (SELECT mwbench_at(d.start, d.span, d.whole, d.n, least(g * 10 + 9, d.n - 1)) + interval '2 seconds' AS at) p,
     LATERAL (SELECT convert_to('[' || repeat('{"email":"user' || g || '@example.org","event":"delivered","sg_event_id":"' ||
         md5('e' || d.di || ':' || g) || '","sg_message_id":"' || md5('m' || d.di || ':' || g) ||
         '","timestamp":1700000000,"smtp-id":"<' || md5('s' || g) || '@mail.example.com>"},', 5) || '{}]', 'UTF8') AS body) b,
     mwbench_slots s
WHERE s.slot = mwbench_slot(d.di, g)
ORDER BY d.di, g`

// historyMessageEventsSQL writes a chunk's message events: outcomes as an
// ESP reports them (sent and delivered for most messages, a few percent
// deferred, bounced and provider-suppressed), recipients over 300,000
// addresses, sending domains skewed towards the account's first ones.
const historyMessageEventsSQL = `
INSERT INTO message_events (id, account_id, provider_id, provider_kind, payload_id, event_id, message_id, event_type,
    bounce_class, recipient, recipient_hash, domain, domain_id, unlinked, classification, detail, occurred_at, received_at)
SELECT mwbench_uuidv7(t.at + interval '2 seconds', 'm' || d.di || ':' || j), s.account_id, s.provider_id, s.provider_kind,
       mwbench_uuidv7(mwbench_at(d.start, d.span, d.whole, d.n, least((j / 10) * 10 + 9, d.n - 1)) + interval '2 seconds',
           'p' || d.di || ':' || (j / 10)),
       s.provider_kind || '-' || d.di || '-' || j, '<' || md5('msg' || d.di || ':' || (j / 2)) || '@mail.example.com>',
       e.typ, CASE WHEN e.typ = 'bounced' THEN CASE WHEN e.r2 < 0.6 THEN 'hard' ELSE 'soft' END END,
       e.rcpt, sha256(convert_to(e.rcpt, 'UTF8')), s.domain_names[e.k + 1], s.domain_ids[e.k + 1], false,
       CASE e.typ WHEN 'bounced' THEN 'bounce' WHEN 'deferred' THEN 'deferred' ELSE '' END,
       CASE WHEN e.typ IN ('bounced', 'deferred') THEN '550 5.1.1 <' || e.rcpt || '>: Recipient address rejected: User unknown' END,
       t.at, t.at + interval '2 seconds'
FROM ` + historyDaysSQL + `, generate_series(0, d.n - 1) AS j,
     LATERAL (SELECT mwbench_at(d.start, d.span, d.whole, d.n, j) AS at) t,
     mwbench_slots s,
     LATERAL (SELECT CASE WHEN r < 0.45 THEN 'sent' WHEN r < 0.90 THEN 'delivered' WHEN r < 0.93 THEN 'deferred'
                          WHEN r < 0.96 THEN 'bounced' WHEN r < 0.961 THEN 'complained' WHEN r < 0.965 THEN 'unsubscribed'
                          ELSE 'suppressed' END AS typ, r2,
                     floor(s.ndomains * power(r3, 2.5))::int AS k,
                     'user' || floor(r4 * 300000)::int || '@' ||
                         (ARRAY['gmail.com', 'yahoo.com', 'outlook.com', 'icloud.com', 'example.org'])[1 + floor(r5 * 5)::int] AS rcpt
              FROM (SELECT random() AS r, random() AS r2, random() AS r3, random() AS r4, random() AS r5, j AS correlated) x) e
WHERE s.slot = mwbench_slot(d.di, j / 10)
ORDER BY d.di, j`

// seedHistoryMessages writes the provider payloads and the message events
// they carried, chunk by chunk (payloads first: message events refer to
// them).
func seedHistoryMessages(ctx context.Context, env *benchEnv, days []historyDay) error {
	for _, chunk := range historyChunks(days, historyStatementRows, 1) {
		args := historyDayArgs(chunk)
		if _, err := env.Pool.Exec(ctx, historyPayloadsSQL, args...); err != nil {
			return fmt.Errorf("error seeding provider payloads: %w", err)
		}
		if _, err := env.Pool.Exec(ctx, historyMessageEventsSQL, args...); err != nil {
			return fmt.Errorf("error seeding message events: %w", err)
		}
	}
	return nil
}

// historyEventsSQL writes a chunk's events from the pinned mix ($6 types,
// $7 payloads, $8 default severities; events_mix.go) with their stored
// renderings byte for byte as events.Rendered.AppendJSON writes them: 2%
// alerts (60% of those older than a day acknowledged), 15% warnings, three
// in four naming one of the account's domains.
const historyEventsSQL = `
INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload, rendered, created_at, acknowledged_at, acknowledged_by)
SELECT x.id, s.account_id, x.typ, x.sev, x.dom, '{prod}', x.payload::jsonb,
       '{"id":"' || x.id || '","event_type":"' || x.typ || '","payload":' || x.payload || ',"created_at":"' ||
           mwbench_rfc3339(t.at) || '","severity":"' || x.sev || '","domain":' || coalesce('"' || x.dom || '"', 'null') ||
           ',"tags":["prod"]}',
       t.at,
       CASE WHEN x.sev = 'critical' AND t.at < $9::timestamptz - interval '1 day' AND x.r3 < 0.6 THEN t.at + interval '1 hour' END,
       CASE WHEN x.sev = 'critical' AND t.at < $9::timestamptz - interval '1 day' AND x.r3 < 0.6 THEN 'oncall@example.com' END
FROM ` + historyDaysSQL + `, generate_series(0, d.n - 1) AS j,
     LATERAL (SELECT mwbench_at(d.start, d.span, d.whole, d.n, j) AS at) t,
     mwbench_slots s,
     LATERAL (SELECT mwbench_uuidv7(t.at, 'e' || d.di || ':' || j) AS id, ($6::text[])[m] AS typ, ($7::text[])[m] AS payload,
                     CASE WHEN r2 < 0.02 THEN 'critical' WHEN r2 < 0.17 THEN 'warning'
                          WHEN ($8::text[])[m] = 'critical' THEN 'warning' ELSE ($8::text[])[m] END AS sev,
                     CASE WHEN r4 < 0.75 THEN s.domain_names[1 + floor(s.ndomains * power(r5, 2.5))::int] END AS dom, r3
              FROM (SELECT 1 + floor(random() * cardinality($6::text[]))::int AS m, random() AS r2, random() AS r3,
                           random() AS r4, random() AS r5, j AS correlated) r) x
WHERE s.slot = mwbench_slot(d.di + 1000, j)
ORDER BY d.di, j`

// historyDeliveriesSQL writes one webhook delivery per event of a time
// range (every account has one subscription to every type): delivered at
// the first attempt, 10% at the second; 1.5% failed after 10 attempts;
// the last day's failures still retrying.
const historyDeliveriesSQL = `
INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body, status, attempts, max_attempts,
    last_status_code, last_error_class, last_error, next_retry_at, created_at, updated_at, delivered_at, failed_at)
SELECT mwbench_uuidv7(e.created_at + interval '5 milliseconds', 'w' || e.id), e.account_id, sub.id, e.id, e.event_type,
       convert_to('{"type":"' || e.event_type || '","timestamp":"' || mwbench_rfc3339(e.created_at) || '","data":' ||
           e.payload::text || '}', 'UTF8'),
       o.status, o.attempts, 10,
       CASE WHEN o.status = 'delivered' THEN 200 ELSE 500 END,
       CASE WHEN o.status <> 'delivered' THEN 'http_status' END,
       CASE WHEN o.status <> 'delivered' THEN 'HTTP 500' END,
       CASE WHEN o.status = 'retrying' THEN e.created_at + interval '2 hours' END,
       e.created_at, e.created_at + o.attempts * interval '30 seconds',
       CASE WHEN o.status = 'delivered' THEN e.created_at + o.attempts * interval '30 seconds' END,
       CASE WHEN o.status = 'failed' THEN e.created_at + interval '1 day' END
FROM events e
JOIN event_subscriptions sub ON sub.account_id = e.account_id,
LATERAL (SELECT CASE WHEN r < 0.985 THEN 'delivered' WHEN e.created_at > $3::timestamptz - interval '1 day' THEN 'retrying'
                     ELSE 'failed' END AS status,
                CASE WHEN r < 0.885 THEN 1 WHEN r < 0.985 THEN 2 WHEN e.created_at > $3::timestamptz - interval '1 day' THEN 4
                     ELSE 10 END AS attempts
         FROM (SELECT random() AS r, e.id AS correlated) x) o
WHERE e.created_at >= $1 AND e.created_at < $2
ORDER BY e.created_at, e.id`

// historyAttemptsSQL writes the attempts of a time range's deliveries.
const historyAttemptsSQL = `
INSERT INTO webhook_delivery_attempts (id, delivery_id, job_attempt, started_at, finished_at, status_code, error_class, error,
    duration_ms, response_body)
SELECT mwbench_uuidv7(x.at, 'a' || w.id || ':' || a), w.id, a, x.at, x.at + interval '40 milliseconds',
       CASE WHEN x.ok THEN 200 ELSE 500 END, CASE WHEN NOT x.ok THEN 'http_status' END, CASE WHEN NOT x.ok THEN 'HTTP 500' END,
       40, CASE WHEN x.ok THEN 'ok' ELSE '{"error":"internal server error"}' END
FROM webhook_deliveries w, generate_series(1, w.attempts) AS a,
LATERAL (SELECT w.created_at + (a - 1) * interval '30 seconds' AS at, w.status = 'delivered' AND a = w.attempts AS ok) x
WHERE w.created_at >= $1 AND w.created_at < $2
ORDER BY x.at, w.id`

// seedHistoryEvents writes the events, then their deliveries and
// attempts, chunk by chunk.
func seedHistoryEvents(ctx context.Context, env *benchEnv, seed *historySeed, days []historyDay) error {
	types, _, err := benchEventTypes()
	if err != nil {
		return err
	}
	names, payloads, severities := make([]string, len(types)), make([]string, len(types)), make([]string, len(types))
	for i, t := range types {
		names[i], payloads[i], severities[i] = t.Name, string(t.Example), string(t.DefaultSeverity)
	}
	// About 2.4 rows (delivery, attempts) follow each event.
	for _, chunk := range historyChunks(days, historyStatementRows, 1) {
		args := append(historyDayArgs(chunk), names, payloads, severities, seed.Now)
		if _, err := env.Pool.Exec(ctx, historyEventsSQL, args...); err != nil {
			return fmt.Errorf("error seeding events: %w", err)
		}
		from, to := chunk[0].Start, chunk[len(chunk)-1].Start.Add(time.Duration(chunk[len(chunk)-1].Span*float64(time.Second)))
		if chunk[len(chunk)-1].Index == days[len(days)-1].Index {
			to = seed.Now.Add(time.Hour)
		}
		if _, err := env.Pool.Exec(ctx, historyDeliveriesSQL, from, to, seed.Now); err != nil {
			return fmt.Errorf("error seeding webhook deliveries: %w", err)
		}
		if _, err := env.Pool.Exec(ctx, historyAttemptsSQL, from, to); err != nil {
			return fmt.Errorf("error seeding webhook delivery attempts: %w", err)
		}
	}
	return nil
}
