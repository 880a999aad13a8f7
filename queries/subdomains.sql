-- name: DMARCSubdomainCount :one
-- How many names the domain knows.
SELECT count(*)::int FROM dmarc_subdomains WHERE domain_id = @domain_id::uuid;

-- name: DMARCSubdomainsSeen :many
-- Moves last_seen on for the names of @names the domain knows (sorted by
-- every writer) and returns them.
UPDATE dmarc_subdomains s SET last_seen = greatest(s.last_seen, @last_day::date)
FROM (SELECT unnest(@names::text[]) AS name) i
WHERE s.domain_id = @domain_id::uuid AND s.name = i.name
RETURNING s.name;

-- name: DMARCSubdomainsAdd :many
-- Adds names new to the domain with the report's first and last days and
-- its messages and passing messages for each; returns those added.
INSERT INTO dmarc_subdomains (domain_id, name, first_seen, last_seen, first_messages, first_passing)
SELECT @domain_id::uuid, r.name, @first_day::date, @last_day::date, r.messages, r.passing
FROM (
    SELECT unnest(@names::text[]) AS name, unnest(@messages::bigint[]) AS messages, unnest(@passing::bigint[]) AS passing
) r
ON CONFLICT (domain_id, name) DO NOTHING
RETURNING name;

-- name: DMARCHeaderFromDayAddMany :exec
-- Adds one report's header_from names to the daily counters, each key
-- once, in the order given (day, name: every writer sends them sorted).
INSERT INTO dmarc_header_from_days AS t (domain_id, day, header_from, messages, passing)
SELECT @domain_id::uuid, r.day, r.header_from, r.messages, r.passing
FROM (
    SELECT unnest(@days::date[]) AS day, unnest(@header_froms::text[]) AS header_from,
        unnest(@messages::bigint[]) AS messages, unnest(@passing::bigint[]) AS passing
) r
ON CONFLICT (domain_id, day, header_from) DO UPDATE SET
    messages = t.messages + EXCLUDED.messages,
    passing = t.passing + EXCLUDED.passing;

-- name: DMARCSubdomainList :many
-- A domain's known names with their messages and passing messages since
-- @since (a day), most recently seen first. The table holds at most the
-- domain's bound of names.
SELECT s.name, s.first_seen, s.last_seen, s.first_messages, s.first_passing, s.dns_exists, s.dns_checked_at,
    coalesce(w.messages, 0)::bigint AS messages, coalesce(w.passing, 0)::bigint AS passing
FROM dmarc_subdomains s
LEFT JOIN LATERAL (
    SELECT sum(h.messages) AS messages, sum(h.passing) AS passing
    FROM dmarc_header_from_days h
    WHERE h.domain_id = s.domain_id AND h.header_from = s.name AND h.day >= @since::date
) w ON true
WHERE s.domain_id = @domain_id::uuid
ORDER BY s.last_seen DESC, coalesce(w.messages, 0) DESC, s.name
LIMIT @max_rows::int;

-- name: DMARCSubdomainsToLookUp :many
-- The domain's subdomains (not the domain itself) to look up in DNS: never
-- looked up first, then those looked up before @stale_before, most recently
-- seen first.
SELECT name FROM dmarc_subdomains
WHERE domain_id = @domain_id::uuid AND name <> @domain::text
  AND (dns_checked_at IS NULL OR dns_checked_at < @stale_before::timestamptz)
ORDER BY dns_checked_at NULLS FIRST, last_seen DESC, name
LIMIT @max_rows::int;

-- name: DMARCSubdomainSetDNS :exec
-- Stores a lookup's outcome; exists NULL (a failed lookup) keeps the
-- previous answer.
UPDATE dmarc_subdomains
SET dns_exists = coalesce(sqlc.narg('exists')::bool, dns_exists), dns_checked_at = @checked_at::timestamptz
WHERE domain_id = @domain_id::uuid AND name = @name::text;

-- name: DMARCNonexistentSubdomains :many
-- The domain's subdomains the last lookup found not to exist (NXDOMAIN)
-- that mail claimed since @since (a day), with that mail's volume, busiest
-- first.
SELECT s.name, coalesce(w.messages, 0)::bigint AS messages, coalesce(w.passing, 0)::bigint AS passing
FROM dmarc_subdomains s
LEFT JOIN LATERAL (
    SELECT sum(h.messages) AS messages, sum(h.passing) AS passing
    FROM dmarc_header_from_days h
    WHERE h.domain_id = s.domain_id AND h.header_from = s.name AND h.day >= @since::date
) w ON true
WHERE s.domain_id = @domain_id::uuid AND s.dns_exists = false AND s.last_seen >= @since::date
ORDER BY coalesce(w.messages, 0) DESC, s.name
LIMIT @max_rows::int;
