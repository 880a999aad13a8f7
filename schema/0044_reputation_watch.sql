-- What a domain's blocklist watch set holds beyond its reports' source IPs
-- (internal/reputation): IP ranges its users pin, its known senders' IPs
-- whose mail fails DMARC, and the return-path and DKIM signing domains of
-- its reports, counted per day at ingest (internal/reports).

-- The IP ranges a user pins on a domain. Each expands into one
-- reputation_targets row per address, origin 'pinned'. The bounds (at most
-- 256 addresses a pin, 16 pins and 1,024 addresses a domain, no overlap)
-- are the reputation package's; cidr is the canonical prefix (masked,
-- IPv4 in dotted form). account_id leads every key so that the table can
-- be distributed by account.
CREATE TABLE reputation_pins (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id  uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    cidr       text        NOT NULL,
    note       text        NOT NULL DEFAULT '' CHECK (length(note) <= 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, domain_id, cidr)
);

-- Two more origins of a watched target: 'sender', the IP of a known sender
-- (its reverse DNS names a service of the sender map) whose mail fails
-- DMARC; 'auth_domain', a return-path or DKIM signing domain of the
-- domain's reports, looked up on the domain lists.
ALTER TABLE reputation_targets DROP CONSTRAINT reputation_targets_origin_check;
ALTER TABLE reputation_targets ADD CONSTRAINT reputation_targets_origin_check
    CHECK (origin IN ('report', 'pinned', 'domain', 'sender', 'auth_domain'));

-- Per domain, day, kind and authenticated domain: the messages of the
-- domain's DMARC records that named it, summed at ingest in the transaction
-- that stores the records, and spread over a report's days as
-- dmarc_source_days is. kind 'return_path' is the envelope-from (SPF MAIL
-- FROM) domain, 'dkim' a DKIM signature's d= domain. Names are normalised
-- (internal/domainname) and a report adds at most a bounded number of them,
-- so the rows of a window follow its days, not the records it holds.
CREATE TABLE dmarc_auth_domain_days (
    domain_id   uuid   NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    day         date   NOT NULL,
    kind        text   NOT NULL CHECK (kind IN ('return_path', 'dkim')),
    auth_domain text   NOT NULL,
    messages    bigint NOT NULL,
    PRIMARY KEY (domain_id, day, kind, auth_domain)
);

-- The data API (as 0041): one's own pins under RLS. The daily counters are
-- not exposed (dmarc_records holds the same names).
ALTER TABLE reputation_pins ENABLE ROW LEVEL SECURITY;
CREATE POLICY reputation_pins_tenant_read ON reputation_pins FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, domain_id, cidr, note, created_at) ON reputation_pins TO authenticated;

CREATE VIEW data_api.reputation_pins WITH (security_invoker = true) AS
    SELECT account_id, domain_id, cidr, note, created_at
    FROM public.reputation_pins;
GRANT SELECT ON data_api.reputation_pins TO authenticated;

-- The counters of the reports already stored whose range ended in the last
-- 15 days (the watch window and a day of reporting delay), so that the
-- blocklist checks see their return-path and DKIM domains at once: the same
-- rule as at ingest (internal/reports AuthDomains: each record once per
-- name and kind, SPF results of scope mfrom or none, at most 100 names a
-- report, busiest first), written in SQL. Names are checked as host names
-- here; the reader checks them again with internal/domainname, which also
-- refuses public suffixes. Each report counts on the UTC day of its
-- midpoint. The read is bounded by the window, once.
INSERT INTO dmarc_auth_domain_days (domain_id, day, kind, auth_domain, messages)
SELECT domain_id, day, kind, name, sum(total)
FROM (
    SELECT n.*, row_number() OVER (PARTITION BY n.report_id ORDER BY n.total DESC, n.kind, n.name) AS rank
    FROM (
        SELECT x.report_id, x.domain_id, x.day, x.kind, x.name, sum(x.count) AS total
        FROM (
            SELECT DISTINCT r.report_id, r.ordinal, r.count, p.domain_id,
                ((p.begin_at + (p.end_at - p.begin_at) / 2) AT TIME ZONE 'UTC')::date AS day, k.kind, k.name
            FROM dmarc_reports p
            JOIN dmarc_records r ON r.report_id = p.id
            CROSS JOIN LATERAL (
                SELECT 'return_path' AS kind, lower(rtrim(regexp_replace(trim(r.envelope_from), '^.*@', ''), '.')) AS name
                UNION ALL
                SELECT 'return_path', lower(rtrim(trim(s ->> 'domain'), '.'))
                FROM jsonb_array_elements(CASE jsonb_typeof(r.spf_results) WHEN 'array' THEN r.spf_results ELSE '[]' END) s
                WHERE coalesce(lower(s ->> 'scope'), '') IN ('', 'mfrom')
                UNION ALL
                SELECT 'dkim', lower(rtrim(trim(d ->> 'domain'), '.'))
                FROM jsonb_array_elements(CASE jsonb_typeof(r.dkim_results) WHEN 'array' THEN r.dkim_results ELSE '[]' END) d
            ) k
            WHERE p.end_at >= now() - interval '15 days' AND r.count > 0
              AND length(k.name) <= 253
              AND k.name ~ '^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
              AND k.name !~ '\.[0-9]+$'
        ) x
        GROUP BY x.report_id, x.domain_id, x.day, x.kind, x.name
    ) n
) ranked
WHERE rank <= 100
GROUP BY domain_id, day, kind, name;
