-- name: ReportingAddressInsert :exec
-- Mints an address (idempotent), marking it signed when @sign is true. An
-- address already there is left alone unless it is signed now for the
-- first time, so minting what exists writes nothing.
INSERT INTO reporting_addresses (local_part, domain_id, account_id, kind, key_id, signed_at)
VALUES (@local_part::text, @domain_id::uuid, @account_id::uuid, @kind::text, @key_id::text,
    CASE WHEN @sign::boolean THEN now() END)
ON CONFLICT (local_part) DO UPDATE SET signed_at = excluded.signed_at
WHERE reporting_addresses.signed_at IS NULL AND excluded.signed_at IS NOT NULL;

-- name: ReportingAddressGet :one
-- The SMTP listener and the HTTPS ingress find a signed address's domain.
SELECT ra.local_part, ra.kind, ra.key_id, ra.account_id, d.id AS domain_id, d.name AS domain_name
FROM reporting_addresses ra
JOIN domains d ON d.id = ra.domain_id
WHERE ra.local_part = @local_part::text;

-- name: ReportingAddressListByDomain :many
SELECT * FROM reporting_addresses WHERE domain_id = @domain_id::uuid ORDER BY created_at DESC, local_part;

-- name: ReportMessageInsert :one
INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw, raw_size)
VALUES (@id::uuid, @account_id::uuid, @domain_id::uuid, @kind::text, @source::text, @raw::bytea, @raw_size::int)
RETURNING id, status, received_at;

-- name: ReportMessageGetForUpdate :one
-- The parse job locks the message it converges (NO KEY UPDATE: the reports
-- referencing it only take KEY SHARE locks).
SELECT rm.*, d.name AS domain_name, d.tags AS domain_tags
FROM report_messages rm
JOIN domains d ON d.id = rm.domain_id
WHERE rm.id = @id::uuid
FOR NO KEY UPDATE OF rm;

-- name: ReportMessageFinish :one
-- Ends a parse. The raw bytes are dropped, except those of a report that
-- failed to parse while the domain's other kept ones and its own stay
-- within @max_kept_bytes (the reparse-reports task parses them again).
UPDATE report_messages rm
SET status = @status::text, reason = sqlc.narg('reason')::text, report_type = sqlc.narg('report_type')::text,
    failure = sqlc.narg('failure')::jsonb, parsed_at = now(),
    raw = CASE WHEN @status::text = 'failed' AND rm.raw_size + (
            SELECT coalesce(sum(o.raw_size), 0) FROM report_messages o
            WHERE o.domain_id = rm.domain_id AND o.status = 'failed' AND o.raw IS NOT NULL AND o.id <> rm.id
        ) <= @max_kept_bytes::bigint THEN rm.raw END
WHERE rm.id = @id::uuid
RETURNING (rm.raw IS NOT NULL)::boolean AS raw_kept;

-- name: ReportMessageRequeueFailed :many
-- Moves the next failed reports whose raw bytes are kept, in (domain, id)
-- order after a cursor, back to pending; the caller queues their parse in
-- the same transaction.
UPDATE report_messages
SET status = 'pending', reason = NULL, report_type = NULL, parsed_at = NULL
WHERE id = ANY(ARRAY(
    SELECT f.id FROM report_messages f
    WHERE f.status = 'failed' AND f.raw IS NOT NULL
        AND (f.domain_id, f.id) > (@after_domain_id::uuid, @after_id::uuid)
    ORDER BY f.domain_id, f.id
    LIMIT @max_rows::int))
RETURNING id, domain_id;

-- name: ReportMessagePruneFailedRaw :execrows
-- Drops the kept raw bytes of failed reports received before a time, at
-- most @max_rows of them per statement.
UPDATE report_messages SET raw = NULL
WHERE id = ANY(ARRAY(
    SELECT f.id FROM report_messages f
    WHERE f.status = 'failed' AND f.raw IS NOT NULL AND f.received_at < @before::timestamptz
    LIMIT @max_rows::int));

-- name: ReportMessageGet :one
SELECT id, account_id, domain_id, kind, source, raw_size, status, reason, report_type, failure, received_at, parsed_at,
    (status = 'failed' AND raw IS NOT NULL)::boolean AS raw_kept
FROM report_messages
WHERE id = @id::uuid AND domain_id = @domain_id::uuid;

-- name: DMARCReportInsert :one
-- A duplicate (same org and report id for the domain) inserts nothing and
-- returns no row.
INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at,
    policy_domain, policy, version, record_count, message_count, pass_count)
VALUES (@id::uuid, @domain_id::uuid, @message_id::uuid, @org_name::text, @report_id::text, @email::text,
    @begin_at::timestamptz, @end_at::timestamptz, @policy_domain::text, @policy::jsonb, @version::text,
    @record_count::int, @message_count::bigint, @pass_count::bigint)
ON CONFLICT (domain_id, org_name, report_id) DO NOTHING
RETURNING id;

-- name: DMARCReportList :many
-- One page of a domain's reports, newest first (ids are time-ordered).
SELECT id, org_name, report_id, email, begin_at, end_at, policy_domain, record_count, message_count, pass_count, created_at
FROM dmarc_reports
WHERE domain_id = @domain_id::uuid AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
ORDER BY id DESC
LIMIT @max_rows::int;

-- name: DMARCReportGet :one
SELECT * FROM dmarc_reports WHERE id = @id::uuid AND domain_id = @domain_id::uuid;

-- name: DMARCRecordList :many
SELECT * FROM dmarc_records WHERE report_id = @report_id::uuid ORDER BY ordinal LIMIT @max_rows::int;

-- name: DMARCSourceDayAddMany :exec
-- Adds one report's share of many (day, source IP) keys, each key once,
-- written in the order given: every writer sends its keys sorted by day,
-- then source IP, so two reports of a domain lock shared rows in one order.
-- dkim_selectors are JSON arrays of strings, one per key.
INSERT INTO dmarc_source_days AS t (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded,
    failing, dkim_selectors)
SELECT @domain_id::uuid, r.day, r.source_ip, r.messages, r.dkim_aligned, r.spf_aligned, r.compliant, r.forwarded, r.failing,
    ARRAY(SELECT jsonb_array_elements_text(r.selectors::jsonb))
FROM (
    -- Set-returning functions in one select list advance in step.
    SELECT unnest(@days::date[]) AS day, unnest(@source_ips::text[]) AS source_ip, unnest(@messages::bigint[]) AS messages,
        unnest(@dkim_aligned::bigint[]) AS dkim_aligned, unnest(@spf_aligned::bigint[]) AS spf_aligned,
        unnest(@compliant::bigint[]) AS compliant, unnest(@forwarded::bigint[]) AS forwarded,
        unnest(@failing::bigint[]) AS failing, unnest(@dkim_selectors::text[]) AS selectors
) r
ON CONFLICT (domain_id, day, source_ip) DO UPDATE
SET messages = t.messages + EXCLUDED.messages,
    dkim_aligned = t.dkim_aligned + EXCLUDED.dkim_aligned,
    spf_aligned = t.spf_aligned + EXCLUDED.spf_aligned,
    compliant = t.compliant + EXCLUDED.compliant,
    forwarded = t.forwarded + EXCLUDED.forwarded,
    failing = t.failing + EXCLUDED.failing,
    dkim_selectors = ARRAY(SELECT DISTINCT s FROM unnest(t.dkim_selectors || EXCLUDED.dkim_selectors) AS s ORDER BY s);

-- name: DMARCAuthDomainDayAddMany :exec
-- Adds one report's return-path and DKIM signing domains to the daily
-- counters, each key once, in the order given (day, kind, name: every
-- writer sends them sorted, after its source days).
INSERT INTO dmarc_auth_domain_days AS t (domain_id, day, kind, auth_domain, messages)
SELECT @domain_id::uuid, r.day, r.kind, r.auth_domain, r.messages
FROM (
    SELECT unnest(@days::date[]) AS day, unnest(@kinds::text[]) AS kind, unnest(@auth_domains::text[]) AS auth_domain,
        unnest(@messages::bigint[]) AS messages
) r
ON CONFLICT (domain_id, day, kind, auth_domain) DO UPDATE SET messages = t.messages + EXCLUDED.messages;

-- name: DMARCSourceDayCutoff :one
-- When a period holds more than @max_rows daily rows: the day of the row
-- that follows its first @max_rows, newest day first, and its newest day.
-- No row when the whole period fits.
SELECT c.day AS cut_day, n.day::date AS newest_day
FROM (
    SELECT day FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
    ORDER BY day DESC, source_ip DESC
    OFFSET @max_rows::int
    LIMIT 1
) c, (
    SELECT max(day) AS day FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
) n;

-- name: DMARCSourceDaySum :many
-- Per source IP over a period, from at most @max_rows daily rows (newest day
-- first), the @max_groups largest.
SELECT source_ip,
       sum(messages)::bigint AS messages,
       sum(dkim_aligned)::bigint AS dkim_aligned,
       sum(spf_aligned)::bigint AS spf_aligned,
       sum(compliant)::bigint AS compliant,
       sum(forwarded)::bigint AS forwarded,
       sum(failing)::bigint AS failing
FROM (
    SELECT * FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
    ORDER BY day DESC, source_ip DESC
    LIMIT @max_rows::int
) d
GROUP BY source_ip
ORDER BY sum(messages) DESC, source_ip
LIMIT @max_groups::int;

-- name: DMARCSourceDayTotals :one
-- All volume and passing volume over a period, from at most @max_rows daily
-- rows (newest day first).
SELECT coalesce(sum(messages), 0)::bigint AS messages,
       coalesce(sum(compliant + forwarded), 0)::bigint AS passing
FROM (
    SELECT messages, compliant, forwarded FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
    ORDER BY day DESC, source_ip DESC
    LIMIT @max_rows::int
) d;

-- name: DMARCSourceSelectors :many
-- The DKIM selectors seen per source IP over a period, from at most
-- @max_rows daily rows (newest day first), for the given source IPs.
SELECT d.source_ip, array_agg(DISTINCT s ORDER BY s)::text[] AS dkim_selectors
FROM (
    SELECT source_ip, dkim_selectors FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
    ORDER BY day DESC, source_ip DESC
    LIMIT @max_rows::int
) d, unnest(d.dkim_selectors) AS s
-- A semi-join (hashed) rather than = ANY, which compares every row with
-- every element of the array.
WHERE d.source_ip IN (SELECT unnest(@source_ips::text[]))
GROUP BY d.source_ip;

-- name: DMARCSelectorsSeen :many
-- Every DKIM selector that passed for the domain in its reports since a day
-- (from at most @max_rows daily rows, newest day first): the domain's DKIM
-- check probes them.
SELECT DISTINCT s::text AS selector
FROM (
    SELECT dkim_selectors FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date
    ORDER BY day DESC, source_ip DESC
    LIMIT @max_rows::int
) d, unnest(d.dkim_selectors) AS s
ORDER BY 1
LIMIT 50;

-- name: DMARCSourcesSeen :many
-- Which of some source IPs the domain's reports named before
-- (dmarc_source_days_source_idx).
SELECT DISTINCT source_ip FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND source_ip = ANY(@source_ips::text[]);

-- name: SourcePTRGetMany :many
SELECT ip, ptr, resolved_at FROM source_ptrs WHERE ip = ANY(@ips::text[]);

-- name: SourcePTRUpsert :exec
INSERT INTO source_ptrs (ip, ptr, resolved_at) VALUES (@ip::text, @ptr::text, now())
ON CONFLICT (ip) DO UPDATE SET ptr = EXCLUDED.ptr, resolved_at = EXCLUDED.resolved_at;

-- name: TLSReportInsert :one
INSERT INTO tls_reports (id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at,
    successful_count, failure_count, policies)
VALUES (@id::uuid, @domain_id::uuid, @message_id::uuid, @org_name::text, @report_id::text, @contact_info::text,
    @begin_at::timestamptz, @end_at::timestamptz, @successful_count::bigint, @failure_count::bigint, @policies::jsonb)
ON CONFLICT (domain_id, org_name, report_id) DO NOTHING
RETURNING id;

-- name: TLSReportList :many
SELECT id, org_name, report_id, contact_info, begin_at, end_at, successful_count, failure_count, created_at
FROM tls_reports
WHERE domain_id = @domain_id::uuid AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
ORDER BY id DESC
LIMIT @max_rows::int;

-- name: TLSReportGet :one
SELECT * FROM tls_reports WHERE id = @id::uuid AND domain_id = @domain_id::uuid;

-- name: ReportDashboard :one
-- An account's report counts since a time, for the dashboard summary: each
-- domain's window read from its (domain_id, created_at) indexes alone
-- (schema/0034), so the cost follows the reports in the window, not the
-- history kept.
SELECT coalesce(sum(x.dmarc_reports), 0)::bigint AS dmarc_reports,
       coalesce(sum(x.dmarc_messages), 0)::bigint AS dmarc_messages,
       coalesce(sum(x.dmarc_passing), 0)::bigint AS dmarc_passing,
       coalesce(sum(x.tls_reports), 0)::bigint AS tls_reports,
       (SELECT count(*) FROM report_messages m
        WHERE m.account_id = @account_id::uuid AND m.received_at >= @since::timestamptz
          AND m.status IN ('refused', 'failed')) AS unusable
FROM domains d
CROSS JOIN LATERAL (
    SELECT count(*) AS dmarc_reports, sum(r.message_count) AS dmarc_messages, sum(r.pass_count) AS dmarc_passing,
        (SELECT count(*) FROM tls_reports t WHERE t.domain_id = d.id AND t.created_at >= @since::timestamptz) AS tls_reports
    FROM dmarc_reports r
    WHERE r.domain_id = d.id AND r.created_at >= @since::timestamptz
) x
WHERE d.account_id = @account_id::uuid;

-- name: ReportFailureList :many
-- One page of a domain's accepted failure reports, newest first: their
-- identity fields only (the raw message is gone once parsed).
SELECT id, source, received_at, failure
FROM report_messages
WHERE domain_id = @domain_id::uuid AND report_type = 'failure' AND status = 'accepted'
    AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
ORDER BY id DESC
LIMIT @max_rows::int;

-- name: TLSReportMessageIDByKey :one
-- The report message that stored a TLS report already (the dedupe key).
SELECT message_id FROM tls_reports
WHERE domain_id = @domain_id::uuid AND org_name = @org_name::text AND report_id = @report_id::text;

-- name: DomainsWithoutReportingAddresses :many
-- Domains lacking an address of either kind under the key @key_id (those
-- registered before registration minted them, or every domain after a key
-- rotation), in id order after @after, for the minting job's batches.
SELECT d.id, d.account_id, d.name FROM domains d
WHERE d.id > @after::uuid
  AND (SELECT count(*) FROM reporting_addresses ra WHERE ra.domain_id = d.id AND ra.key_id = @key_id::text) < 2
ORDER BY d.id
LIMIT @max_rows::int;

-- name: DMARCSourceVersionBump :exec
-- Takes the domain's version lock first: a writer of many statements then
-- never waits for it while holding daily rows another writer needs (the
-- triggers of 0032 bump it again after each statement).
INSERT INTO dmarc_source_versions AS v (domain_id, version)
VALUES (@domain_id::uuid, nextval('dmarc_source_version_seq'))
ON CONFLICT (domain_id) DO UPDATE SET version = EXCLUDED.version;

-- name: DMARCSourceVersion :one
-- The domain's daily source rows' version (0 before any write).
SELECT coalesce((SELECT version FROM dmarc_source_versions WHERE domain_id = @domain_id::uuid), 0)::bigint AS version;

-- name: DMARCSourceSummaryGet :one
-- The domain's summary of a window, only while it is current: computed
-- from the domain's daily rows as they are and since fresh_since.
SELECT s.truncated, s.period_since, s.source_count, s.total_messages, s.legitimate_messages, s.passing_messages
FROM dmarc_source_summaries s
WHERE s.domain_id = @domain_id::uuid AND s.kind = @kind::smallint
  AND s.since_day = @since::date AND s.until_day = @until::date AND s.computed_at >= @fresh_since::timestamptz
  AND s.version = coalesce((SELECT v.version FROM dmarc_source_versions v WHERE v.domain_id = @domain_id::uuid), 0);

-- name: DMARCSourceSummaryGroups :many
-- A summary's first sources, most volume first.
SELECT name, type, known, base_domain, category, messages, compliant, forwarded, failing, dkim_aligned, spf_aligned,
       ip_count, ips, dkim_selectors
FROM dmarc_source_summary_groups
WHERE domain_id = @domain_id::uuid AND kind = @kind::smallint
ORDER BY rank
LIMIT @max_rows::int;

-- name: DMARCSourceSummaryFailingKnown :many
-- A summary's known senders failing DMARC, most failing volume first
-- (their partial index), without their IPs: the guidance names none.
SELECT name, type, known, base_domain, category, messages, compliant, forwarded, failing, dkim_aligned, spf_aligned,
       ip_count, '[]'::jsonb AS ips, dkim_selectors
FROM dmarc_source_summary_groups
WHERE domain_id = @domain_id::uuid AND kind = @kind::smallint AND known AND failing > 0
ORDER BY failing DESC, rank
LIMIT @max_rows::int;

-- name: DMARCSourceSummaryPut :exec
INSERT INTO dmarc_source_summaries (domain_id, kind, since_day, until_day, version, truncated, period_since, source_count,
    total_messages, legitimate_messages, passing_messages, computed_at)
VALUES (@domain_id::uuid, @kind::smallint, @since::date, @until::date, @version::bigint, @truncated::boolean,
    @period_since::date, @source_count::integer, @total_messages::bigint, @legitimate_messages::bigint,
    @passing_messages::bigint, @computed_at::timestamptz)
ON CONFLICT (domain_id, kind) DO UPDATE SET since_day = EXCLUDED.since_day, until_day = EXCLUDED.until_day,
    version = EXCLUDED.version, truncated = EXCLUDED.truncated, period_since = EXCLUDED.period_since,
    source_count = EXCLUDED.source_count, total_messages = EXCLUDED.total_messages,
    legitimate_messages = EXCLUDED.legitimate_messages, passing_messages = EXCLUDED.passing_messages,
    computed_at = EXCLUDED.computed_at;

-- name: DMARCSourceSummaryGroupsClear :exec
DELETE FROM dmarc_source_summary_groups WHERE domain_id = @domain_id::uuid AND kind = @kind::smallint;

-- name: DMARCSourceSummaryGroupsPut :exec
-- Stores a summary's sources from one JSON array, in rank order.
INSERT INTO dmarc_source_summary_groups (domain_id, kind, rank, name, type, known, base_domain, category, messages, compliant,
    forwarded, failing, dkim_aligned, spf_aligned, ip_count, ips, dkim_selectors)
SELECT @domain_id::uuid, @kind::smallint, (g.ordinality - 1)::int, g.v->>'name', g.v->>'type', (g.v->>'known')::boolean,
       g.v->>'base_domain', g.v->>'category', (g.v->>'messages')::bigint, (g.v->>'compliant')::bigint,
       (g.v->>'forwarded')::bigint, (g.v->>'failing')::bigint, (g.v->>'dkim_aligned')::bigint,
       (g.v->>'spf_aligned')::bigint, (g.v->>'ip_count')::int, g.v->'ips',
       ARRAY(SELECT jsonb_array_elements_text(g.v->'dkim_selectors'))
FROM jsonb_array_elements(@groups::jsonb) WITH ORDINALITY AS g(v, ordinality);

-- name: DMARCDomainDayAddMany :exec
-- Adds one report's share of each day to the domain's daily categories,
-- days in ascending order (the writers of a domain are ordered by its
-- version lock, taken first).
INSERT INTO dmarc_domain_days AS t (domain_id, day, compliant, forwarded, non_compliant, threat_unknown)
SELECT @domain_id::uuid, r.day, r.compliant, r.forwarded, r.non_compliant, r.threat_unknown
FROM (
    SELECT unnest(@days::date[]) AS day, unnest(@compliant::bigint[]) AS compliant, unnest(@forwarded::bigint[]) AS forwarded,
        unnest(@non_compliant::bigint[]) AS non_compliant, unnest(@threat_unknown::bigint[]) AS threat_unknown
) r
ON CONFLICT (domain_id, day) DO UPDATE
SET compliant = t.compliant + EXCLUDED.compliant,
    forwarded = t.forwarded + EXCLUDED.forwarded,
    non_compliant = t.non_compliant + EXCLUDED.non_compliant,
    threat_unknown = t.threat_unknown + EXCLUDED.threat_unknown;

-- name: DMARCDomainDayList :many
-- The domain's daily categories from @since to @until (inclusive), oldest
-- first: at most one row per day.
SELECT day, compliant, forwarded, non_compliant, threat_unknown FROM dmarc_domain_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
ORDER BY day;

-- name: DMARCDomainDayDelete :exec
DELETE FROM dmarc_domain_days WHERE domain_id = @domain_id::uuid;

-- name: DMARCDomainDayTotals :many
-- A rebuild's per-day totals of the domain's daily source rows, for the
-- days from @since to @until.
SELECT day, sum(compliant)::bigint AS compliant, sum(forwarded)::bigint AS forwarded, sum(failing)::bigint AS failing
FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
GROUP BY day
ORDER BY day;

-- name: DMARCDomainDayFailingNamed :many
-- A rebuild's failing volume per day and cached reverse DNS name, for the
-- days from @since to @until: only IPs with a name, which may be a known
-- sender's.
SELECT d.day, p.ptr, sum(d.failing)::bigint AS failing
FROM dmarc_source_days d
JOIN source_ptrs p ON p.ip = d.source_ip AND p.ptr <> ''
WHERE d.domain_id = @domain_id::uuid AND d.day >= @since::date AND d.day <= @until::date AND d.failing > 0
GROUP BY d.day, p.ptr
ORDER BY d.day, p.ptr;

-- name: DMARCDomainDayRange :one
-- The first and last day of the domain's daily source rows.
SELECT coalesce(min(day), '0001-01-01')::date AS first_day, coalesce(max(day), '0001-01-01')::date AS last_day
FROM dmarc_source_days WHERE domain_id = @domain_id::uuid;

-- name: DMARCDomainBackfillNext :many
-- The next domains whose daily categories wait for a rebuild, locked for
-- this run (a concurrent run takes others).
SELECT domain_id FROM dmarc_domain_days_backfill
ORDER BY domain_id
LIMIT @max_rows::int
FOR UPDATE SKIP LOCKED;

-- name: DMARCDomainBackfillDone :exec
DELETE FROM dmarc_domain_days_backfill WHERE domain_id = @domain_id::uuid;
