-- name: ReputationDomain :one
SELECT id, account_id, name FROM domains WHERE id = @id::uuid;

-- name: ReputationDomainByName :one
SELECT id, account_id, name FROM domains WHERE account_id = @account_id::uuid AND name = @name::text;

-- name: ReputationSourceIPs :many
-- The source IPs that carried the domain's compliant or forwarded mail
-- since @since, with their messages since @share_since, busiest first.
SELECT source_ip,
       coalesce(sum(messages) FILTER (WHERE day >= @share_since::date), 0)::bigint AS recent_messages
FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date
GROUP BY source_ip
HAVING sum(compliant + forwarded) > 0
ORDER BY 2 DESC, source_ip
LIMIT @max_ips::int;

-- name: ReputationDomainMessages :one
SELECT coalesce(sum(messages), 0)::bigint FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date;

-- name: ReputationTargets :many
SELECT * FROM reputation_targets
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
ORDER BY share DESC, target;

-- name: ReputationTargetUpsertMany :exec
-- Stores a watch set: one row per target, in the order given (the caller
-- holds the domain's watch lock). A row whose values did not change is
-- left as it is.
INSERT INTO reputation_targets AS t (account_id, domain_id, target, kind, origin, messages, share)
SELECT @account_id::uuid, @domain_id::uuid, r.target, r.kind, r.origin, r.messages, r.share
FROM (
    SELECT unnest(@targets::text[]) AS target, unnest(@kinds::text[]) AS kind, unnest(@origins::text[]) AS origin,
        unnest(@messages::bigint[]) AS messages, unnest(@shares::float8[]) AS share
) r
ON CONFLICT (account_id, domain_id, target) DO UPDATE SET
    kind = excluded.kind, origin = excluded.origin, messages = excluded.messages, share = excluded.share, updated_at = now()
WHERE (t.kind, t.origin, t.messages, t.share) IS DISTINCT FROM (excluded.kind, excluded.origin, excluded.messages, excluded.share);

-- name: ReputationTargetsPrune :many
-- Drops the targets no longer in the watch set (pins included: the watch
-- set holds the addresses of the current pins) and returns them.
DELETE FROM reputation_targets
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
  AND NOT (target = ANY (@keep::text[]))
RETURNING target, origin;

-- name: ReputationListingsEnd :exec
-- Ends the current listings of targets no longer watched, without an
-- event: the rows stay as history.
UPDATE reputation_listings SET delisted_at = @at::timestamptz
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND target = ANY (@targets::text[])
  AND delisted_at IS NULL;

-- name: ReputationWatchLock :exec
-- Serialises the writers of a domain's watch set (a check's refresh, a pin
-- added or removed) until the end of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended(@lock_key::text, 44));

-- name: ReputationSenderCandidates :many
-- The source IPs whose mail since @since all failed DMARC and whose reverse
-- DNS name is cached, with their messages since @share_since, busiest
-- first: the caller keeps those the name makes known senders.
SELECT s.source_ip, s.recent_messages, p.ptr
FROM (
    SELECT source_ip, coalesce(sum(messages) FILTER (WHERE day >= @share_since::date), 0)::bigint AS recent_messages
    FROM dmarc_source_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date
    GROUP BY source_ip
    HAVING sum(compliant + forwarded) = 0
) s
JOIN source_ptrs p ON p.ip = s.source_ip AND p.ptr <> ''
ORDER BY s.recent_messages DESC, s.source_ip
LIMIT @max_rows::int;

-- name: ReputationIPMessages :many
-- The messages of each of @ips (a domain's pinned addresses) since @since.
SELECT source_ip, coalesce(sum(messages), 0)::bigint AS messages
FROM dmarc_source_days
WHERE domain_id = @domain_id::uuid AND day >= @since::date AND source_ip = ANY (@ips::text[])
GROUP BY source_ip;

-- name: ReputationAuthDomains :many
-- The return-path and DKIM signing domains of the domain's reports since
-- @since, the domain itself left out, busiest first (the busier kind of a
-- name counts), with their messages since @share_since.
SELECT auth_domain, coalesce(max(recent), 0)::bigint AS recent_messages
FROM (
    SELECT auth_domain, kind, sum(messages) FILTER (WHERE day >= @share_since::date) AS recent, sum(messages) AS total
    FROM dmarc_auth_domain_days
    WHERE domain_id = @domain_id::uuid AND day >= @since::date AND auth_domain <> @name::text
    GROUP BY auth_domain, kind
) k
GROUP BY auth_domain
ORDER BY max(total) DESC, auth_domain
LIMIT @max_rows::int;

-- name: ReputationPins :many
SELECT * FROM reputation_pins
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
ORDER BY created_at, cidr;

-- name: ReputationPinAdd :one
INSERT INTO reputation_pins (account_id, domain_id, cidr, note)
VALUES (@account_id::uuid, @domain_id::uuid, @cidr::text, @note::text)
RETURNING *;

-- name: ReputationPinDelete :execrows
DELETE FROM reputation_pins
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND cidr = @cidr::text;

-- name: ReputationTargetsChecked :exec
UPDATE reputation_targets SET checked_at = @checked_at::timestamptz
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND target = ANY (@targets::text[]);

-- name: BlocklistLookupGet :one
SELECT * FROM blocklist_lookups WHERE zone = @zone::text AND target = @target::text;

-- name: BlocklistLookupStore :exec
INSERT INTO blocklist_lookups (zone, target, status, codes, reason, checked_at, expires_at)
VALUES (@zone::text, @target::text, @status::text, @codes::jsonb, @reason::text, @checked_at::timestamptz, @expires_at::timestamptz)
ON CONFLICT (zone, target) DO UPDATE SET
    status = excluded.status, codes = excluded.codes, reason = excluded.reason,
    checked_at = excluded.checked_at, expires_at = excluded.expires_at;

-- name: ReputationListed :one
-- Records a listing; returns a row only when it is new (no row, or the
-- previous listing ended), so that the caller emits exactly once.
INSERT INTO reputation_listings (account_id, domain_id, zone, target, codes, reason, listed_at)
VALUES (@account_id::uuid, @domain_id::uuid, @zone::text, @target::text, @codes::jsonb, @reason::text, @at::timestamptz)
ON CONFLICT (account_id, domain_id, zone, target) DO UPDATE SET
    codes = excluded.codes, reason = excluded.reason,
    listed_at = CASE WHEN reputation_listings.delisted_at IS NULL THEN reputation_listings.listed_at ELSE excluded.listed_at END,
    delisted_at = NULL
RETURNING (xmax = 0 OR @at::timestamptz = listed_at)::boolean AS is_new;

-- name: ReputationDelisted :many
-- Ends the current listing; returns a row only when one ended.
UPDATE reputation_listings SET delisted_at = @at::timestamptz
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND zone = @zone::text AND target = @target::text
  AND delisted_at IS NULL
RETURNING listed_at;

-- name: ReputationListings :many
SELECT * FROM reputation_listings
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
ORDER BY zone, target;

-- name: ReputationDomainsToCheck :many
-- Domains with DMARC data since @since or a pinned range, after @after in
-- id order, for the periodic check.
SELECT d.id FROM domains d
WHERE d.id > @after::uuid
  AND (EXISTS (SELECT 1 FROM dmarc_source_days s WHERE s.domain_id = d.id AND s.day >= @since::date)
       OR EXISTS (SELECT 1 FROM reputation_pins p WHERE p.account_id = d.account_id AND p.domain_id = d.id))
ORDER BY d.id
LIMIT @max_rows::int;
