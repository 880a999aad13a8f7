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

-- name: ReputationTargetUpsert :exec
INSERT INTO reputation_targets (account_id, domain_id, target, kind, origin, messages, share)
VALUES (@account_id::uuid, @domain_id::uuid, @target::text, @kind::text, @origin::text, @messages::bigint, @share::float8)
ON CONFLICT (account_id, domain_id, target) DO UPDATE SET
    kind = excluded.kind, origin = excluded.origin, messages = excluded.messages, share = excluded.share, updated_at = now();

-- name: ReputationTargetsPrune :exec
-- Drops the computed targets no longer in the watch set; pins stay.
DELETE FROM reputation_targets
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND origin <> 'pinned'
  AND NOT (target = ANY (@keep::text[]));

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
-- Domains with DMARC data since @since, after @after in id order, for the
-- periodic check.
SELECT d.id FROM domains d
WHERE d.id > @after::uuid
  AND EXISTS (SELECT 1 FROM dmarc_source_days s WHERE s.domain_id = d.id AND s.day >= @since::date)
ORDER BY d.id
LIMIT @max_rows::int;
