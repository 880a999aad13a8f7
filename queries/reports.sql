-- name: ReportingAddressInsert :exec
INSERT INTO reporting_addresses (local_part, domain_id, account_id, kind, key_id)
VALUES (@local_part::text, @domain_id::uuid, @account_id::uuid, @kind::text, @key_id::text)
ON CONFLICT (local_part) DO NOTHING;

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

-- name: ReportMessageFinish :exec
UPDATE report_messages
SET status = @status::text, reason = sqlc.narg('reason')::text, report_type = sqlc.narg('report_type')::text,
    failure = sqlc.narg('failure')::jsonb, raw = NULL, parsed_at = now()
WHERE id = @id::uuid;

-- name: ReportMessageGet :one
SELECT id, account_id, domain_id, kind, source, raw_size, status, reason, report_type, failure, received_at, parsed_at
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

-- name: DMARCSourceDayAdd :batchexec
-- Adds one report's share of a (day, source IP); sent as one batch per
-- report, each key once.
INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing, dkim_selectors)
VALUES (@domain_id::uuid, @day::date, @source_ip::text, @messages::bigint, @dkim_aligned::bigint, @spf_aligned::bigint,
    @compliant::bigint, @forwarded::bigint, @failing::bigint, @dkim_selectors::text[])
ON CONFLICT (domain_id, day, source_ip) DO UPDATE
SET messages = dmarc_source_days.messages + EXCLUDED.messages,
    dkim_aligned = dmarc_source_days.dkim_aligned + EXCLUDED.dkim_aligned,
    spf_aligned = dmarc_source_days.spf_aligned + EXCLUDED.spf_aligned,
    compliant = dmarc_source_days.compliant + EXCLUDED.compliant,
    forwarded = dmarc_source_days.forwarded + EXCLUDED.forwarded,
    failing = dmarc_source_days.failing + EXCLUDED.failing,
    dkim_selectors = ARRAY(SELECT DISTINCT s FROM unnest(dmarc_source_days.dkim_selectors || EXCLUDED.dkim_selectors) AS s ORDER BY s);

-- name: DMARCSourceDaySum :many
-- Per source IP over a period.
SELECT source_ip,
       sum(messages)::bigint AS messages,
       sum(dkim_aligned)::bigint AS dkim_aligned,
       sum(spf_aligned)::bigint AS spf_aligned,
       sum(compliant)::bigint AS compliant,
       sum(forwarded)::bigint AS forwarded,
       sum(failing)::bigint AS failing,
       min(day)::date AS first_day
FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date AND day <= @until::date
GROUP BY source_ip
ORDER BY sum(messages) DESC, source_ip
LIMIT 5000;

-- name: DMARCSourceSelectors :many
-- The DKIM selectors seen per source IP over a period.
SELECT d.source_ip, array_agg(DISTINCT s ORDER BY s)::text[] AS dkim_selectors
FROM dmarc_source_days d, unnest(d.dkim_selectors) AS s
WHERE d.domain_id = @domain_id::uuid AND d.day >= @since::date AND d.day <= @until::date
GROUP BY d.source_ip;

-- name: DMARCSelectorsSeen :many
-- Every DKIM selector that passed for the domain in its reports since a day:
-- the domain's DKIM check probes them.
SELECT DISTINCT s::text AS selector
FROM dmarc_source_days d, unnest(d.dkim_selectors) AS s
WHERE d.domain_id = @domain_id::uuid AND d.day >= @since::date
ORDER BY 1
LIMIT 50;

-- name: DMARCSourcesSeen :many
-- Which of some source IPs the domain's reports named before.
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
-- An account's report counts since a time, for the dashboard summary.
SELECT
    (SELECT count(*) FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id
        WHERE d.account_id = @account_id::uuid AND r.created_at >= @since::timestamptz) AS dmarc_reports,
    (SELECT coalesce(sum(r.message_count), 0) FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id
        WHERE d.account_id = @account_id::uuid AND r.created_at >= @since::timestamptz)::bigint AS dmarc_messages,
    (SELECT coalesce(sum(r.pass_count), 0) FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id
        WHERE d.account_id = @account_id::uuid AND r.created_at >= @since::timestamptz)::bigint AS dmarc_passing,
    (SELECT count(*) FROM tls_reports r JOIN domains d ON d.id = r.domain_id
        WHERE d.account_id = @account_id::uuid AND r.created_at >= @since::timestamptz) AS tls_reports,
    (SELECT count(*) FROM report_messages m
        WHERE m.account_id = @account_id::uuid AND m.received_at >= @since::timestamptz AND m.status IN ('refused', 'failed')) AS unusable;

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
