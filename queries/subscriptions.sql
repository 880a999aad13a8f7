-- name: SubscriptionInsert :one
INSERT INTO event_subscriptions (id, account_id, url, event_types, domain_filter, tag_filter, secret_ciphertext, secret_key_id)
VALUES (@id::uuid, @account_id::uuid, @url::text, sqlc.narg('event_types')::text[], sqlc.narg('domain_filter')::text,
        sqlc.narg('tag_filter')::text, @secret_ciphertext::bytea, @secret_key_id::text)
RETURNING *;

-- name: SubscriptionGetByID :one
SELECT * FROM event_subscriptions WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: SubscriptionListByAccount :many
SELECT * FROM event_subscriptions WHERE account_id = @account_id::uuid ORDER BY id LIMIT @max::int;

-- name: SubscriptionUpdate :one
UPDATE event_subscriptions
SET url             = @url::text,
    event_types     = sqlc.narg('event_types')::text[],
    domain_filter   = sqlc.narg('domain_filter')::text,
    tag_filter      = sqlc.narg('tag_filter')::text,
    enabled         = @enabled::boolean,
    disabled_reason = CASE WHEN @enabled::boolean THEN NULL ELSE coalesce(disabled_reason, sqlc.narg('disabled_reason')::text) END,
    disabled_at     = CASE WHEN @enabled::boolean THEN NULL ELSE coalesce(disabled_at, now()) END,
    failing_since   = CASE WHEN @enabled::boolean AND NOT enabled THEN NULL ELSE failing_since END,
    failing_notified_at = CASE WHEN @enabled::boolean AND NOT enabled THEN NULL ELSE failing_notified_at END,
    updated_at      = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: SubscriptionDelete :execrows
DELETE FROM event_subscriptions WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: SubscriptionListMatching :many
-- The enabled subscriptions an event goes to: its type is
-- in event_types (or event_types is NULL), its domain equals domain_filter
-- and one of its tags equals tag_filter, when those are set.
SELECT id FROM event_subscriptions
WHERE account_id = @account_id::uuid
  AND enabled
  AND (event_types IS NULL OR @event_type::text = ANY (event_types))
  AND (domain_filter IS NULL OR domain_filter = sqlc.narg('domain')::text)
  AND (tag_filter IS NULL OR tag_filter = ANY (@tags::text[]))
ORDER BY id;

-- name: SubscriptionGetForDelivery :one
SELECT * FROM event_subscriptions WHERE id = @id::uuid;

-- name: SubscriptionMarkFailing :exec
UPDATE event_subscriptions SET failing_since = @now::timestamptz
WHERE id = @id::uuid AND failing_since IS NULL;

-- name: SubscriptionDisable :one
-- Disables an enabled subscription; no row when it was already disabled
-- (or, with a cutoff, when it has not been failing since before it).
UPDATE event_subscriptions
SET enabled = false, disabled_reason = @reason::text, disabled_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id::uuid AND enabled
  AND (sqlc.narg('failing_before')::timestamptz IS NULL OR failing_since <= sqlc.narg('failing_before')::timestamptz)
RETURNING *;

-- name: SubscriptionMarkFailingNotified :one
-- Marks an enabled subscription failing since before the cutoff as
-- notified (subscription_failing), once per failing period: no row when it
-- is healthy, failing for less long, disabled or already notified.
UPDATE event_subscriptions
SET failing_notified_at = @now::timestamptz
WHERE id = @id::uuid AND enabled AND failing_notified_at IS NULL
  AND failing_since <= @failing_before::timestamptz
RETURNING *;

-- name: SubscriptionRecover :one
-- Ends the notified failing period of a subscription whose push was just
-- accepted (DeliveryFinishDeliveredMany leaves those to this statement):
-- failing_since and failing_notified_at are cleared and the period's start
-- returned. No row when another run ended it first, or it is not notified.
UPDATE event_subscriptions s
SET failing_since = NULL, failing_notified_at = NULL,
    last_success_at = greatest(s.last_success_at, @succeeded_at::timestamptz)
FROM (SELECT id, failing_since FROM event_subscriptions
      WHERE id = @id::uuid AND failing_notified_at IS NOT NULL
      FOR UPDATE) old
WHERE s.id = old.id
RETURNING s.id, s.account_id, s.url, old.failing_since AS previous_failing_since;
