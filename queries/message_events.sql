-- name: MessageEventInsert :one
-- No row when the provider's event id was stored before with the same
-- time (a duplicate; the key holds the partition key, occurred_at).
INSERT INTO message_events (id, account_id, provider_id, provider_kind, payload_id, event_id, message_id, event_type,
                            bounce_class, recipient, recipient_hash, domain, domain_id, unlinked, classification,
                            detail, occurred_at)
VALUES (@id::uuid, @account_id::uuid, @provider_id::uuid, @provider_kind::text, sqlc.narg('payload_id')::uuid,
        @event_id::text, @message_id::text, @event_type::text, sqlc.narg('bounce_class')::text, @recipient::text,
        @recipient_hash::bytea, @domain::text, sqlc.narg('domain_id')::uuid, @unlinked::boolean,
        @classification::text, sqlc.narg('detail')::text, @occurred_at::timestamptz)
ON CONFLICT (provider_id, event_id, occurred_at) DO NOTHING
RETURNING id;

-- name: MessageEventWindowCounts :one
-- Counts of one (domain, provider) in [since, until): sends, deliveries,
-- hard bounces and complaints. Provider-suppressed messages are their own
-- type and never count as bounces.
SELECT count(*) FILTER (WHERE event_type = 'sent')::bigint                               AS sent,
       count(*) FILTER (WHERE event_type = 'delivered')::bigint                          AS delivered,
       count(*) FILTER (WHERE event_type = 'bounced')::bigint                            AS bounced,
       count(*) FILTER (WHERE event_type = 'bounced' AND bounce_class = 'hard')::bigint  AS hard_bounced,
       count(*) FILTER (WHERE event_type = 'complained')::bigint                         AS complained
FROM message_events
WHERE domain_id = @domain_id::uuid AND provider_id = @provider_id::uuid
  AND occurred_at >= @since::timestamptz AND occurred_at < @until::timestamptz;

-- name: MessageEventDomainCounts :one
-- Counts of one domain over every provider in [since, until).
SELECT count(*) FILTER (WHERE event_type = 'sent')::bigint                               AS sent,
       count(*) FILTER (WHERE event_type = 'delivered')::bigint                          AS delivered,
       count(*) FILTER (WHERE event_type = 'bounced')::bigint                            AS bounced,
       count(*) FILTER (WHERE event_type = 'bounced' AND bounce_class = 'hard')::bigint  AS hard_bounced,
       count(*) FILTER (WHERE event_type = 'complained')::bigint                         AS complained
FROM message_events
WHERE domain_id = @domain_id::uuid AND occurred_at >= @since::timestamptz AND occurred_at < @until::timestamptz;

-- name: MessageEventDailyVolume :many
SELECT date_trunc('day', occurred_at AT TIME ZONE 'UTC')::date AS day, event_type, count(*)::bigint AS count
FROM message_events
WHERE account_id = @account_id::uuid AND occurred_at >= @since::timestamptz
  AND (sqlc.narg('domain')::text IS NULL OR domain = sqlc.narg('domain')::text)
GROUP BY 1, 2 ORDER BY 1, 2;

-- name: MessageEventTypeBreakdown :many
SELECT event_type, provider_kind, count(*)::bigint AS count
FROM message_events
WHERE account_id = @account_id::uuid AND occurred_at > @since::timestamptz
GROUP BY 1, 2 ORDER BY 1, 2;

-- name: MessageEventAccountCounts :one
SELECT count(*) FILTER (WHERE event_type = 'sent')::bigint                               AS sent,
       count(*) FILTER (WHERE event_type = 'delivered')::bigint                          AS delivered,
       count(*) FILTER (WHERE event_type = 'bounced')::bigint                            AS bounced,
       count(*) FILTER (WHERE event_type = 'bounced' AND bounce_class = 'hard')::bigint  AS hard_bounced,
       count(*) FILTER (WHERE event_type = 'complained')::bigint                         AS complained
FROM message_events
WHERE account_id = @account_id::uuid AND occurred_at >= @since::timestamptz;

-- name: MessageEventPruneBatchForPlan :execrows
-- Deletes up to batch_size message events older than the cutoff of the
-- accounts on one plan (an account without a plan of its own is on the
-- default plan): the plan's own, shorter retention. Older partitions are
-- dropped whole (internal/partitions); this deletes from the ones kept.
DELETE FROM message_events
WHERE (provider_id, event_id, occurred_at) IN (
    SELECT m.provider_id, m.event_id, m.occurred_at FROM message_events m
    WHERE m.account_id IN (SELECT a.id FROM accounts a LEFT JOIN account_plans p ON p.account_id = a.id
                           WHERE coalesce(p.plan, @default_plan::text) = @plan::text)
      AND m.occurred_at < @before::timestamptz
    LIMIT @batch_size::int
);

-- name: MessageEventPruneBefore :execrows
-- Deletes up to batch_size message events older than the cutoff; the job
-- passes a cutoff below every range partition (partitions.PruneBefore),
-- so this only empties the DEFAULT partition of expired rows.
DELETE FROM message_events
WHERE (provider_id, event_id, occurred_at) IN (
    SELECT provider_id, event_id, occurred_at FROM message_events
    WHERE occurred_at < @before::timestamptz
    LIMIT @batch_size::int
);
