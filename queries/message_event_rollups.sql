-- Reads of the message-event rollups (schema/0029_message_event_rollups.sql).
-- Each takes a window as rollups.Split divides it: whole UTC hours from the
-- hourly rollups in [hours_from, hours_to) (hours_to NULL: open-ended) and
-- the raw rows of the partial hours [head_from, head_to) and
-- [tail_from, tail_to), each shorter than an hour, through the
-- (account_id, occurred_at) index. internal/providers/rollups.go is the only
-- caller.

-- name: MessageRollupAccountDays :many
-- An account's events per UTC day, provider kind, outcome and bounce class.
SELECT x.day::date AS day, x.provider_kind::text AS provider_kind, x.event_type::text AS event_type,
       x.bounce_class, sum(x.n)::bigint AS count
FROM (
    SELECT (hour AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, n
    FROM message_event_account_hourly
    WHERE account_id = @account_id::uuid AND hour >= @hours_from::timestamptz
      AND hour < coalesce(sqlc.narg('hours_to')::timestamptz, 'infinity'::timestamptz)
    UNION ALL
    SELECT (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND occurred_at >= @head_from::timestamptz AND occurred_at < @head_to::timestamptz
    UNION ALL
    SELECT (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND occurred_at >= @tail_from::timestamptz AND occurred_at < @tail_to::timestamptz
) x
GROUP BY 1, 2, 3, 4
HAVING sum(x.n) <> 0
ORDER BY 1, 2, 3, 4;

-- name: MessageRollupDomainNameDays :many
-- The same for the events of one sending domain name (linked, unlinked or
-- of a deleted domain).
SELECT x.day::date AS day, x.provider_kind::text AS provider_kind, x.event_type::text AS event_type,
       x.bounce_class, sum(x.n)::bigint AS count
FROM (
    SELECT (hour AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, n
    FROM message_event_domain_hourly
    WHERE account_id = @account_id::uuid AND domain = @domain::text AND hour >= @hours_from::timestamptz
      AND hour < coalesce(sqlc.narg('hours_to')::timestamptz, 'infinity'::timestamptz)
    UNION ALL
    SELECT (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND domain = @domain::text
      AND occurred_at >= @head_from::timestamptz AND occurred_at < @head_to::timestamptz
    UNION ALL
    SELECT (occurred_at AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND domain = @domain::text
      AND occurred_at >= @tail_from::timestamptz AND occurred_at < @tail_to::timestamptz
) x
GROUP BY 1, 2, 3, 4
HAVING sum(x.n) <> 0
ORDER BY 1, 2, 3, 4;

-- name: MessageRollupDomainProviders :many
-- A linked domain's events per provider, outcome and bounce class.
SELECT x.provider_id::uuid AS provider_id, x.event_type::text AS event_type, x.bounce_class,
       sum(x.n)::bigint AS count
FROM (
    SELECT provider_id, event_type, bounce_class, n
    FROM message_event_domain_hourly
    WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND hour >= @hours_from::timestamptz
      AND hour < coalesce(sqlc.narg('hours_to')::timestamptz, 'infinity'::timestamptz)
    UNION ALL
    SELECT provider_id, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
      AND occurred_at >= @head_from::timestamptz AND occurred_at < @head_to::timestamptz
    UNION ALL
    SELECT provider_id, event_type, bounce_class, 1::bigint
    FROM message_events
    WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
      AND occurred_at >= @tail_from::timestamptz AND occurred_at < @tail_to::timestamptz
) x
GROUP BY 1, 2, 3
HAVING sum(x.n) <> 0
ORDER BY 1, 2, 3;
