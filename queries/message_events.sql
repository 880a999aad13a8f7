-- name: MessageEventInsert :one
-- No row when the provider's event id was stored before (a duplicate).
INSERT INTO message_events (id, account_id, provider_id, provider_kind, payload_id, event_id, message_id, event_type,
                            bounce_class, recipient, recipient_hash, domain, domain_id, unlinked, classification,
                            detail, occurred_at)
VALUES (@id::uuid, @account_id::uuid, @provider_id::uuid, @provider_kind::text, sqlc.narg('payload_id')::uuid,
        @event_id::text, @message_id::text, @event_type::text, sqlc.narg('bounce_class')::text, @recipient::text,
        @recipient_hash::bytea, @domain::text, sqlc.narg('domain_id')::uuid, @unlinked::boolean,
        @classification::text, sqlc.narg('detail')::text, @occurred_at::timestamptz)
ON CONFLICT (provider_id, event_id) DO NOTHING
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
