-- name: DKIMSelectorSeenInReport :one
-- Records the selector signing the domain's mail in a report stored at
-- seen_at, with the report's source IPs using it (the latest first, 10
-- kept); clears its idle mark. A selector new to a domain that has
-- max_selectors already is not recorded (no row). inserted says whether it
-- is new.
INSERT INTO dkim_selectors AS s (domain_id, selector, first_seen_at, report_first_at, report_last_at, sources)
SELECT @domain_id::uuid, @selector::text, @seen_at::timestamptz, @seen_at::timestamptz, @seen_at::timestamptz, @sources::text[]
WHERE (SELECT count(*) FROM dkim_selectors c WHERE c.domain_id = @domain_id::uuid) < @max_selectors::int
   OR EXISTS (SELECT 1 FROM dkim_selectors e WHERE e.domain_id = @domain_id::uuid AND e.selector = @selector::text)
ON CONFLICT (domain_id, selector) DO UPDATE
SET report_first_at = coalesce(s.report_first_at, EXCLUDED.report_first_at),
    report_last_at = greatest(s.report_last_at, EXCLUDED.report_last_at),
    sources = (SELECT coalesce(array_agg(x.ip ORDER BY x.o), '{}') FROM (
        SELECT ip, min(o) AS o FROM unnest(EXCLUDED.sources || s.sources) WITH ORDINALITY AS u(ip, o)
        GROUP BY ip ORDER BY min(o) LIMIT 10) x),
    idle_since = NULL
RETURNING (xmax = 0) AS inserted;

-- name: DKIMSelectorSeenInDNS :one
-- Records the key a DNS check found for the selector at seen_at (its type
-- and size); past max_selectors a new one is not recorded (no row).
-- inserted says whether the selector is new; previous_weak_record is the
-- record dkim_key_weak was last raised for.
INSERT INTO dkim_selectors AS s (domain_id, selector, first_seen_at, dns_first_at, dns_last_at, published, key_type, key_bits)
SELECT @domain_id::uuid, @selector::text, @seen_at::timestamptz, @seen_at::timestamptz, @seen_at::timestamptz, true,
    @key_type::text, @key_bits::int
WHERE (SELECT count(*) FROM dkim_selectors c WHERE c.domain_id = @domain_id::uuid) < @max_selectors::int
   OR EXISTS (SELECT 1 FROM dkim_selectors e WHERE e.domain_id = @domain_id::uuid AND e.selector = @selector::text)
ON CONFLICT (domain_id, selector) DO UPDATE
SET dns_first_at = coalesce(s.dns_first_at, EXCLUDED.dns_first_at),
    dns_last_at = EXCLUDED.dns_last_at, published = true, key_type = EXCLUDED.key_type, key_bits = EXCLUDED.key_bits
RETURNING (xmax = 0) AS inserted, coalesce(weak_record, '')::text AS previous_weak_record;

-- name: DKIMSelectorUnpublished :exec
-- A DNS check found no key for the selector.
UPDATE dkim_selectors SET published = false WHERE domain_id = @domain_id::uuid AND selector = @selector::text;

-- name: DKIMSelectorMarkWeak :exec
UPDATE dkim_selectors SET weak_record = @record::text WHERE domain_id = @domain_id::uuid AND selector = @selector::text;

-- name: DKIMSelectorsIdle :many
-- Published selectors unseen in reports since @before (never seen: since
-- they were first seen), not marked idle yet, of domains whose reports
-- cover that time (a reporter seen since before @before and again since
-- @reported_since: without reports, unseen says nothing), the oldest
-- first, locked for this run.
SELECT s.domain_id, s.selector, s.report_last_at, s.first_seen_at, d.account_id, d.name AS domain_name, d.tags AS domain_tags
FROM dkim_selectors s
JOIN domains d ON d.id = s.domain_id
WHERE s.published AND s.idle_since IS NULL AND coalesce(s.report_last_at, s.first_seen_at) < @before::timestamptz
  AND EXISTS (SELECT 1 FROM dmarc_reporters r WHERE r.domain_id = s.domain_id
              AND r.first_seen_at < @before::timestamptz AND r.last_seen_at >= @reported_since::timestamptz)
ORDER BY coalesce(s.report_last_at, s.first_seen_at), s.domain_id, s.selector
LIMIT @max_rows::int
FOR UPDATE OF s SKIP LOCKED;

-- name: DKIMSelectorMarkIdle :exec
UPDATE dkim_selectors SET idle_since = @idle_since::timestamptz WHERE domain_id = @domain_id::uuid AND selector = @selector::text;

-- name: DKIMSelectorList :many
SELECT selector, first_seen_at, report_first_at, report_last_at, dns_first_at, dns_last_at, published, key_type, key_bits,
       sources, idle_since
FROM dkim_selectors
WHERE domain_id = @domain_id::uuid
ORDER BY selector;
