-- name: ChannelInsert :one
INSERT INTO notification_channels (id, account_id, kind, label, secret_ciphertext, secret_key_id, destination,
    groups, min_severity, domain_filter, tag_filter)
VALUES (@id::uuid, @account_id::uuid, @kind::text, @label::text, @secret_ciphertext::bytea, @secret_key_id::text,
    @destination::text, sqlc.narg('groups')::text[], @min_severity::text, sqlc.narg('domain_filter')::text,
    sqlc.narg('tag_filter')::text)
RETURNING *;

-- name: ChannelGetByID :one
SELECT * FROM notification_channels WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ChannelGet :one
-- The channel whatever its account: the send worker's read.
SELECT * FROM notification_channels WHERE id = @id::uuid;

-- name: ChannelListByAccount :many
SELECT * FROM notification_channels WHERE account_id = @account_id::uuid ORDER BY id LIMIT @max::int;

-- name: ChannelCount :one
SELECT count(*)::int FROM notification_channels WHERE account_id = @account_id::uuid;

-- name: ChannelLockAccount :exec
-- Serialises creations of one account's channels so that the cap holds
-- under concurrent requests.
SELECT id FROM accounts WHERE id = @account_id::uuid FOR NO KEY UPDATE;

-- name: ChannelUpdate :one
-- Replaces a channel's label and routing filters (its destination stays).
UPDATE notification_channels
SET label = @label::text, groups = sqlc.narg('groups')::text[], min_severity = @min_severity::text,
    domain_filter = sqlc.narg('domain_filter')::text, tag_filter = sqlc.narg('tag_filter')::text, updated_at = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: ChannelDelete :execrows
DELETE FROM notification_channels WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ChannelEmitTargets :many
-- The channels one emitted event goes to (internal/events fanOut), in the
-- emitting transaction. Slack and Teams: severity at least min_severity,
-- the group in groups (or groups NULL, or a required group), domain and
-- tag filters as subscriptions have them. PagerDuty: critical events that
-- match the group, domain and tag filters (a trigger, recorded in
-- notification_channel_alerts), and the acknowledgement events of an
-- alert the channel was sent (alert_id set: a resolve or a re-trigger).
WITH matched AS (
    SELECT c.id, c.kind
    FROM notification_channels c
    WHERE c.account_id = @account_id::uuid
      AND (
        (c.kind <> 'pagerduty' OR @severity::text = 'critical')
        AND array_position(ARRAY['info', 'warning', 'critical'], @severity::text)
            >= array_position(ARRAY['info', 'warning', 'critical'], c.min_severity)
        AND (c.groups IS NULL OR @required::boolean OR @group_name::text = ANY (c.groups))
        AND (c.domain_filter IS NULL OR c.domain_filter = sqlc.narg('domain')::text)
        AND (c.tag_filter IS NULL OR c.tag_filter = ANY (@tags::text[]))
        OR c.kind = 'pagerduty' AND EXISTS (
            SELECT 1 FROM notification_channel_alerts a
            WHERE a.channel_id = c.id AND a.alert_id = sqlc.narg('alert_id')::uuid)
      )
),
recorded AS (
    INSERT INTO notification_channel_alerts (channel_id, alert_id, account_id)
    SELECT m.id, @event_id::uuid, @account_id::uuid FROM matched m
    WHERE m.kind = 'pagerduty' AND @severity::text = 'critical'
    ON CONFLICT DO NOTHING
)
SELECT m.id FROM matched m ORDER BY m.id;

-- name: ChannelRecordSuccess :one
-- A send succeeded: the failure clock stops. Returns whether the channel
-- was failing long enough to have raised notification_channel_failing.
UPDATE notification_channels n
SET last_success_at = @now::timestamptz, failing_since = NULL, last_error = NULL, failing_notified_at = NULL
FROM (SELECT id, failing_notified_at FROM notification_channels WHERE id = @id::uuid FOR UPDATE) old
WHERE n.id = old.id
RETURNING (old.failing_notified_at IS NOT NULL)::boolean AS was_notified;

-- name: ChannelRecordFailure :one
-- A send failed: the failure clock starts at the first failure since the
-- last success. notify is true once per failing period, when the channel
-- has been failing since failing_cutoff or earlier.
UPDATE notification_channels
SET failing_since = coalesce(failing_since, @now::timestamptz),
    last_error = @last_error::text,
    failing_notified_at = CASE
        WHEN failing_notified_at IS NULL AND coalesce(failing_since, @now::timestamptz) <= @failing_cutoff::timestamptz
        THEN @now::timestamptz ELSE failing_notified_at END
WHERE id = @id::uuid
RETURNING failing_since::timestamptz AS failing_since,
    coalesce(failing_notified_at = @now::timestamptz, false)::boolean AS notify;

-- name: ChannelAlertPrune :execrows
-- Deletes up to batch_size records of alerts that are gone (pruned with
-- their events), recorded before @before.
DELETE FROM notification_channel_alerts a
WHERE (a.channel_id, a.alert_id) IN (
    SELECT x.channel_id, x.alert_id FROM notification_channel_alerts x
    WHERE x.created_at < @before::timestamptz
      AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = x.alert_id)
    LIMIT @batch_size::int
);
