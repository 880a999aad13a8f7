-- name: SubscriptionInsert :one
INSERT INTO event_subscriptions (id, account_id, url, event_types, domain_filter, tag_filter, secret_ciphertext, secret_key_id, max_per_second, max_in_flight)
VALUES (@id::uuid, @account_id::uuid, @url::text, sqlc.narg('event_types')::text[], sqlc.narg('domain_filter')::text,
        sqlc.narg('tag_filter')::text, @secret_ciphertext::bytea, @secret_key_id::text, sqlc.narg('max_per_second')::integer,
        sqlc.narg('max_in_flight')::integer)
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
    max_per_second  = sqlc.narg('max_per_second')::integer,
    max_in_flight   = sqlc.narg('max_in_flight')::integer,
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

-- name: SubscriptionRotateSecret :one
-- Seals a new signing secret in; the one it replaces signs beside it until
-- previous_expires_at, or is dropped at once when that is NULL. A secret
-- still in the grace of an earlier rotation is dropped: at most two sign.
UPDATE event_subscriptions
SET previous_secret_ciphertext = CASE WHEN sqlc.narg('previous_expires_at')::timestamptz IS NULL THEN NULL ELSE secret_ciphertext END,
    previous_secret_key_id     = CASE WHEN sqlc.narg('previous_expires_at')::timestamptz IS NULL THEN NULL ELSE secret_key_id END,
    previous_secret_expires_at = sqlc.narg('previous_expires_at')::timestamptz,
    secret_ciphertext          = @secret_ciphertext::bytea,
    secret_key_id              = @secret_key_id::text,
    secret_rotated_at          = @now::timestamptz,
    updated_at                 = @now::timestamptz
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: SubscriptionRetirePreviousSecret :execrows
-- Drops a replaced secret whose grace period has ended.
UPDATE event_subscriptions
SET previous_secret_ciphertext = NULL, previous_secret_key_id = NULL, previous_secret_expires_at = NULL
WHERE id = @id::uuid AND previous_secret_expires_at <= @now::timestamptz;

-- name: SubscriptionRateTake :one
-- Admits one push of a subscription with max_per_second (a GCRA cell):
-- admitted while the theoretical arrival time is not past horizon (now
-- plus the burst's tolerance); it then moves on by one emission interval
-- (next_tat is now plus that interval). No row when the push must wait.
INSERT INTO subscription_rate_cells AS c (subscription_id, tat)
VALUES (@id::uuid, @next_tat::timestamptz)
ON CONFLICT (subscription_id) DO UPDATE
SET tat = greatest(c.tat, @now::timestamptz) + (excluded.tat - @now::timestamptz)
WHERE c.tat <= @horizon::timestamptz
RETURNING tat;

-- name: SubscriptionRateGet :one
SELECT tat FROM subscription_rate_cells WHERE subscription_id = @id::uuid;

-- name: SubscriptionLeaseTake :one
-- Leases the lowest free push slot, 0 to last_slot, of a subscription
-- with max_in_flight (a slot is free when it has no lease or its lease expired). No row when
-- every slot is taken, or when a concurrent push took the same slot first.
INSERT INTO subscription_push_leases AS l (subscription_id, slot, delivery_id, expires_at)
SELECT @id::uuid, g, @delivery_id::uuid, @expires_at::timestamptz
FROM generate_series(0, @last_slot::int) AS g
WHERE NOT EXISTS (SELECT 1 FROM subscription_push_leases x
                  WHERE x.subscription_id = @id::uuid AND x.slot = g AND x.expires_at > @now::timestamptz)
ORDER BY g
LIMIT 1
ON CONFLICT (subscription_id, slot) DO UPDATE
SET delivery_id = excluded.delivery_id, expires_at = excluded.expires_at
WHERE l.expires_at <= @now::timestamptz
RETURNING slot;

-- name: SubscriptionLeaseRelease :exec
DELETE FROM subscription_push_leases
WHERE subscription_id = @id::uuid AND slot = @slot::int AND delivery_id = @delivery_id::uuid;

-- name: SubscriptionLeasesInFlight :one
-- The pushes of a subscription in flight now (leases not expired).
SELECT count(*)::int FROM subscription_push_leases
WHERE subscription_id = @id::uuid AND expires_at > @now::timestamptz;

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
