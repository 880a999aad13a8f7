-- name: EventInsert :one
INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload, rendered, created_at)
VALUES (@id::uuid, @account_id::uuid, @event_type::text, @severity::text, sqlc.narg('domain')::text,
        @tags::text[], @payload::jsonb, @rendered::text, @created_at::timestamptz)
RETURNING *;

-- name: EventGetByID :one
SELECT * FROM events WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- Listing (events and alerts) is composed in internal/events/list.go from
-- fixed fragments, one statement per filter combination, so that each
-- statement's predicates match the partial indexes literally.

-- name: AlertAcknowledge :one
-- Conditional: of concurrent acknowledgements exactly one updates the row;
-- the others find acknowledged_at set once the winner commits.
UPDATE events
SET acknowledged_at   = @acknowledged_at::timestamptz,
    acknowledged_by   = @acknowledged_by::text,
    acknowledged_note = sqlc.narg('note')::text,
    acknowledged_key  = @key_identifier::text
WHERE id = @id::uuid
  AND account_id = @account_id::uuid
  AND severity = 'critical'
  AND acknowledged_at IS NULL
RETURNING *;

-- name: AlertUnacknowledge :one
-- Returns the cleared row and the acknowledgement it withdrew.
WITH prev AS (
    SELECT id, acknowledged_by, acknowledged_note
    FROM events
    WHERE id = @id::uuid
      AND account_id = @account_id::uuid
      AND severity = 'critical'
      AND acknowledged_at IS NOT NULL
    FOR UPDATE
)
UPDATE events e
SET acknowledged_at = NULL, acknowledged_by = NULL, acknowledged_note = NULL, acknowledged_key = NULL
FROM prev
WHERE e.id = prev.id AND e.acknowledged_at IS NOT NULL
RETURNING e.id, e.account_id, e.event_type, e.severity, e.domain, e.tags, e.payload, e.created_at,
          prev.acknowledged_by AS previous_by, prev.acknowledged_note AS previous_note;

-- name: EventCountUnacknowledgedAlerts :one
-- From the counters of schema/0043_open_counts.sql: one row per hour and
-- slot with an open alert, however many alerts there are.
SELECT coalesce(sum(alerts), 0)::bigint FROM alert_open_counts WHERE account_id = @account_id::uuid;

-- name: EventCountsByDay :many
-- The account's events per UTC day, type and severity in a window that
-- internal/rollups.SplitDays divided: its whole UTC days [days_from,
-- days_to) (days_to NULL: open-ended) from the daily counters, its whole
-- hours before the first and after the last midnight ([head_hours_from,
-- head_hours_to), [tail_hours_from, tail_hours_to)) from the hourly ones,
-- its partial hours at either end ([head_from, head_to), [tail_from,
-- tail_to), each under an hour) from raw rows. internal/events/counts.go
-- reads it. The counters' slots (schema/0039) are summed with the rest; a
-- key whose sum is zero is left out.
SELECT day, event_type, severity, sum(events)::bigint AS events
FROM (
    SELECT d.day, d.event_type, d.severity, d.events
    FROM event_counts_daily d
    WHERE d.account_id = @account_id::uuid AND d.day >= @days_from::date
      AND d.day < coalesce(sqlc.narg('days_to')::date, 'infinity'::date)
    UNION ALL
    SELECT (c.hour AT TIME ZONE 'UTC')::date, c.event_type, c.severity, c.events
    FROM event_counts_hourly c
    WHERE c.account_id = @account_id::uuid
      AND ((c.hour >= @head_hours_from::timestamptz AND c.hour < @head_hours_to::timestamptz)
        OR (c.hour >= @tail_hours_from::timestamptz AND c.hour < @tail_hours_to::timestamptz))
    UNION ALL
    SELECT (e.created_at AT TIME ZONE 'UTC')::date, e.event_type, e.severity, 1
    FROM events e
    WHERE e.account_id = @account_id::uuid
      AND e.created_at >= @head_from::timestamptz AND e.created_at < @head_to::timestamptz
    UNION ALL
    SELECT (e.created_at AT TIME ZONE 'UTC')::date, e.event_type, e.severity, 1
    FROM events e
    WHERE e.account_id = @account_id::uuid
      AND e.created_at >= @tail_from::timestamptz AND e.created_at < @tail_to::timestamptz
) counted
GROUP BY day, event_type, severity
HAVING sum(events) <> 0
ORDER BY day, event_type, severity;

-- name: EventRollupRebuild :one
-- Recomputes one account's hourly counters from its raw rows and its daily
-- counters from those, into slot 0 (see event_counts_hourly_rebuild in
-- schema/0030_event_rollups.sql, 0036_event_daily_rollups.sql and
-- 0039_striped_event_counts.sql for the locks); returns how many keys it
-- corrected.
SELECT event_counts_hourly_rebuild(@account_id::uuid)::bigint AS corrected;

-- name: OpenCountsRebuild :one
-- Recounts one account's open alerts and deliveries from the raw rows (see
-- open_counts_rebuild in schema/0043_open_counts.sql for the lock); returns
-- how many keys it corrected.
SELECT open_counts_rebuild(@account_id::uuid)::bigint AS corrected;

-- name: EventRollupAccountsAfter :many
-- The accounts a rebuild of every account visits, in id order, a page at a time.
SELECT id FROM accounts WHERE id > @after::uuid ORDER BY id LIMIT @max::int;

-- name: EventPruneBatch :one
-- Deletes up to batch_size events older than the cutoff, keeping
-- unacknowledged alerts, and their deliveries (no foreign key cascades to
-- them, 0028); returns the events deleted. The job passes a cutoff below
-- every range partition (partitions.PruneBefore): older weeks are dropped
-- whole, so this only empties the DEFAULT partition. SKIP LOCKED lets two
-- pruners (or an acknowledgement in flight) proceed without waiting on each
-- other.
WITH gone AS (
    DELETE FROM events
    WHERE (account_id, created_at, id) IN (
        SELECT account_id, created_at, id FROM events
        WHERE created_at < @before::timestamptz
          AND (severity <> 'critical' OR acknowledged_at IS NOT NULL)
        LIMIT @batch_size::int
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id
), deliveries AS (
    DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone;

-- name: EventPruneBatchForPlan :one
-- As EventPruneBatch, for the accounts on one plan (an account without a
-- plan of its own is on the default plan): the plan's own, shorter
-- retention, from the partitions still kept. Each account's rows are found
-- through its primary key (account_id, created_at, id).
WITH gone AS (
    DELETE FROM events
    WHERE (account_id, created_at, id) IN (
        SELECT e.account_id, e.created_at, e.id FROM events e
        WHERE e.account_id IN (SELECT a.id FROM accounts a LEFT JOIN account_plans p ON p.account_id = a.id
                               WHERE coalesce(p.plan, @default_plan::text) = @plan::text)
          AND e.created_at < @before::timestamptz
          AND (e.severity <> 'critical' OR e.acknowledged_at IS NOT NULL)
        LIMIT @batch_size::int
        FOR UPDATE OF e SKIP LOCKED
    )
    RETURNING id
), deliveries AS (
    DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone;

-- name: EventCauseCandidates :many
-- The account's events of @types about one domain in [since, until),
-- newest first: the likely causes of an event at until
-- (internal/events/causes.go).
SELECT id, event_type, payload, created_at FROM events
WHERE account_id = @account_id::uuid AND event_type = ANY(@types::text[]) AND domain = @domain::text
  AND created_at >= @since::timestamptz AND created_at < @until::timestamptz
ORDER BY created_at DESC, id DESC
LIMIT @max_rows::int;
