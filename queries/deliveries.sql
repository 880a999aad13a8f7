-- name: DeliveryInsertMany :exec
-- One row per matching subscription of one event, all with the same body.
INSERT INTO webhook_deliveries (id, account_id, subscription_id, event_id, event_type, body, job_id, created_at, updated_at)
SELECT unnest(@ids::uuid[]), @account_id::uuid, unnest(@subscription_ids::uuid[]), @event_id::uuid, @event_type::text,
       @body::bytea, unnest(@job_ids::bigint[]), now(), now();

-- name: DeliveryGetByID :one
SELECT * FROM webhook_deliveries WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: DeliveryGetByIDForUpdate :one
SELECT * FROM webhook_deliveries WHERE id = @id::uuid AND account_id = @account_id::uuid FOR UPDATE;

-- name: DeliveryGetForWork :one
-- The worker's view: the delivery (locked) and its subscription.
SELECT sqlc.embed(d), sqlc.embed(s)
FROM webhook_deliveries d
JOIN event_subscriptions s ON s.id = d.subscription_id
WHERE d.id = @id::uuid
FOR UPDATE OF d;

-- name: DeliveryList :many
-- Newest first; ids are UUIDv7, so the id orders by creation.
SELECT * FROM webhook_deliveries
WHERE account_id = @account_id::uuid
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status')::text)
  AND (sqlc.narg('subscription_id')::uuid IS NULL OR subscription_id = sqlc.narg('subscription_id')::uuid)
  AND (sqlc.narg('event_id')::uuid IS NULL OR event_id = sqlc.narg('event_id')::uuid)
  AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
ORDER BY id DESC
LIMIT @max::int;

-- name: DeliveryCountOpen :one
-- From the counters of schema/0043_open_counts.sql: one row per hour,
-- status and slot with an open delivery, however many deliveries there are.
SELECT coalesce(sum(deliveries) FILTER (WHERE status = 'pending'), 0)::bigint  AS pending,
       coalesce(sum(deliveries) FILTER (WHERE status = 'retrying'), 0)::bigint AS retrying,
       coalesce(sum(deliveries) FILTER (WHERE status = 'failed'), 0)::bigint   AS failed
FROM delivery_open_counts
WHERE account_id = @account_id::uuid;

-- name: DeliveryStartAttempt :one
-- A run of job_id starts an attempt: it owns the delivery from now on.
-- max_attempts follows the job: attempts made + the job's attempts left.
UPDATE webhook_deliveries
SET attempts     = attempts + 1,
    max_attempts = attempts + 1 + @job_attempts_left::int,
    status       = CASE WHEN status IN ('failed', 'delivered') THEN 'retrying' ELSE status END,
    job_id       = @job_id::bigint,
    next_retry_at = NULL,
    updated_at   = now()
WHERE id = @id::uuid
RETURNING *;

-- name: DeliveryMarkFailed :one
-- Ends a delivery without an attempt (subscription disabled, job
-- cancelled or deleted outside the API). A failed delivery fails again
-- (an operator's retry of its job that cannot push); a delivered one is
-- left alone.
UPDATE webhook_deliveries
SET status = 'failed', last_error = @last_error::text, last_error_class = @last_error_class::text,
    next_retry_at = NULL, failed_at = now(), updated_at = now()
WHERE id = @id::uuid AND status IN ('pending', 'retrying', 'failed')
RETURNING *;

-- name: DeliveryRequeue :many
-- A manual retry, or a recovery's batch: each delivery (ids[i]) is queued
-- again on its job (job_ids[i]), for one more attempt at least.
UPDATE webhook_deliveries d
SET status        = CASE WHEN d.attempts = 0 THEN 'pending' ELSE 'retrying' END,
    job_id        = i.job_id,
    max_attempts  = greatest(d.max_attempts, d.attempts + 1),
    next_retry_at = @next_retry_at::timestamptz,
    failed_at     = NULL,
    updated_at    = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@job_ids::bigint[]) AS job_id) i
WHERE d.id = i.id AND d.id = ANY (@ids::uuid[])
RETURNING d.*;

-- name: DeliveryRecoverBatch :many
-- The next failed deliveries of a subscription created in [from_id, to_id)
-- (UUIDv7 floors of a time range), after the keyset cursor, locked; rows
-- another transaction holds (a concurrent recovery, a push starting) are
-- skipped, so two recoveries never queue one delivery twice.
SELECT * FROM webhook_deliveries
WHERE subscription_id = @subscription_id::uuid AND account_id = @account_id::uuid AND status = 'failed'
  AND id >= @from_id::uuid AND id < @to_id::uuid AND id > @after::uuid
ORDER BY id
LIMIT @max::int
FOR UPDATE SKIP LOCKED;

-- name: DeliverySetNextRetry :exec
UPDATE webhook_deliveries SET next_retry_at = @next_retry_at::timestamptz, updated_at = now()
WHERE id = @id::uuid;

-- name: DeliveryAttemptInsert :one
INSERT INTO webhook_delivery_attempts (id, delivery_id, job_id, job_attempt, started_at)
VALUES (@id::uuid, @delivery_id::uuid, @job_id::bigint, @job_attempt::int, @started_at::timestamptz)
RETURNING *;

-- name: DeliveryAttemptCloseInterrupted :execrows
-- Attempts started but never finished: their worker died mid-request.
UPDATE webhook_delivery_attempts
SET finished_at = now(), error_class = 'interrupted', error = 'the worker stopped before the attempt finished'
WHERE delivery_id = @delivery_id::uuid AND finished_at IS NULL;

-- name: DeliveryAttemptListByDelivery :many
SELECT * FROM webhook_delivery_attempts WHERE delivery_id = @delivery_id::uuid ORDER BY started_at, id LIMIT 1000;

-- name: DeliveryFinishAttempt :one
-- Records an attempt's outcome: the attempt row, the delivery row and, on
-- success, the subscription's health, in one statement. The subscription
-- row is written (and locked) only when it changes, at most once a minute,
-- so pushes to one subscription do not queue on its row.
WITH attempt AS (
    UPDATE webhook_delivery_attempts
    SET finished_at = @finished_at::timestamptz, status_code = sqlc.narg('status_code')::int,
        error_class = sqlc.narg('error_class')::text, error = sqlc.narg('error')::text,
        duration_ms = @duration_ms::int, response_body = sqlc.narg('response_body')::text,
        response_truncated = @response_truncated::boolean, counted = NOT @uncount::boolean
    WHERE delivery_id = @id::uuid AND id = @attempt_id::uuid
), healthy AS (
    UPDATE event_subscriptions
    SET failing_since = NULL, last_success_at = @finished_at::timestamptz
    WHERE id = @subscription_id::uuid AND @status::text = 'delivered' AND failing_notified_at IS NULL
      AND (failing_since IS NOT NULL OR last_success_at IS NULL OR last_success_at < @stale_before::timestamptz)
)
UPDATE webhook_deliveries
SET status           = @status::text,
    attempts         = attempts - CASE WHEN @uncount::boolean THEN 1 ELSE 0 END,
    last_status_code = sqlc.narg('status_code')::int,
    last_error_class = sqlc.narg('error_class')::text,
    last_error       = sqlc.narg('error')::text,
    next_retry_at    = sqlc.narg('next_retry_at')::timestamptz,
    delivered_at     = CASE WHEN @status::text = 'delivered' THEN now() ELSE delivered_at END,
    failed_at        = CASE WHEN @status::text = 'failed' THEN now() ELSE NULL END,
    updated_at       = now()
WHERE id = @id::uuid
RETURNING *;

-- name: DeliveryRetractAttempt :execrows
-- Undoes the start of an attempt that sent nothing because its push was
-- over a fairness bound (webhook.Gate): the attempt row goes, and the
-- delivery's count with it, so that waiting for a turn uses no attempt and
-- leaves no trace in the attempt history; the delivery waits until
-- next_retry_at, when its snoozed job runs again.
-- The delivery's row is locked before the attempt's, the order in which a
-- run starting on it (a rescued job) takes them, so the two never deadlock.
WITH delivery AS (
    SELECT id FROM webhook_deliveries WHERE id = @id::uuid FOR NO KEY UPDATE
), gone AS (
    DELETE FROM webhook_delivery_attempts
    WHERE id = @attempt_id::uuid AND delivery_id IN (SELECT id FROM delivery) AND finished_at IS NULL
    RETURNING delivery_id
)
UPDATE webhook_deliveries d
SET attempts = d.attempts - 1, next_retry_at = @next_retry_at::timestamptz, updated_at = now()
FROM gone
WHERE d.id = gone.delivery_id;

-- name: DeliveryStartOwnedMany :many
-- The worker's fast path, for many runs at once (the push worker coalesces
-- the runs that start while a statement is in flight): when a run's job
-- owns a delivery that is still pending or retrying and its subscription
-- is enabled, close interrupted attempts, record the new attempt (before
-- the push) and count it. Each input row is one run: a delivery id, the
-- job that runs it, the new attempt's id, the job's attempt number and
-- attempts left, and when it started. Runs whose delivery is not theirs to
-- push are left out of the result; they take the slow path one by one.
-- Rows are locked in id order, so two batches never deadlock on each other.
WITH input AS (
    SELECT unnest(@ids::uuid[])                  AS id,
           unnest(@job_ids::bigint[])            AS job_id,
           unnest(@attempt_ids::uuid[])          AS attempt_id,
           unnest(@job_attempts::int[])          AS job_attempt,
           unnest(@job_attempts_left::int[])     AS job_attempts_left,
           unnest(@started_at::timestamptz[])    AS started_at
), owned AS (
    SELECT d.id, i.job_id, i.attempt_id, i.job_attempt, i.job_attempts_left, i.started_at,
           s.url, s.secret_ciphertext, s.secret_key_id, s.previous_secret_ciphertext, s.previous_secret_key_id,
           s.previous_secret_expires_at, s.max_per_second, s.max_in_flight
    FROM input i
    JOIN webhook_deliveries d ON d.id = i.id AND d.job_id = i.job_id
    JOIN event_subscriptions s ON s.id = d.subscription_id
    WHERE d.status IN ('pending', 'retrying') AND s.enabled
      -- A suspended account's pushes take the slow path, which snoozes them.
      AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id AND a.suspended_at IS NOT NULL)
    ORDER BY d.id
    FOR UPDATE OF d
), closed AS (
    UPDATE webhook_delivery_attempts a
    SET finished_at = now(), error_class = 'interrupted', error = 'the worker stopped before the attempt finished'
    FROM owned
    WHERE a.delivery_id = owned.id AND a.finished_at IS NULL
), attempt AS (
    INSERT INTO webhook_delivery_attempts (id, delivery_id, job_id, job_attempt, started_at)
    SELECT owned.attempt_id, owned.id, owned.job_id, owned.job_attempt, owned.started_at FROM owned
)
UPDATE webhook_deliveries w
SET attempts = w.attempts + 1, max_attempts = w.attempts + 1 + owned.job_attempts_left, next_retry_at = NULL, updated_at = now()
FROM owned
WHERE w.id = owned.id
RETURNING w.id, w.account_id, w.subscription_id, w.event_id, w.event_type, w.body, w.status, w.attempts,
          owned.job_id::bigint AS job_id, owned.url, owned.secret_ciphertext, owned.secret_key_id,
          owned.previous_secret_ciphertext, owned.previous_secret_key_id, owned.previous_secret_expires_at,
          owned.max_per_second, owned.max_in_flight;

-- name: DeliveryFinishDeliveredMany :many
-- DeliveryFinishAttempt for many accepted pushes at once (the push worker
-- coalesces the outcomes that arrive while a statement is in flight). A
-- subscription's health is written once per batch, and only when it
-- changes, except that of a subscription notified failing
-- (subscription_failing): that one is left for SubscriptionRecover, which
-- raises subscription_recovered. The result is each delivery's
-- subscription and whether it was in that state (as it was before this
-- statement). The deliveries are the main statement, so that their rows
-- are locked before the attempts' and the subscriptions' (the secondary
-- statements run after it), the order in which a run starting on the same
-- delivery (a rescued job) takes them: the two wait, never deadlock.
WITH input AS (
    SELECT unnest(@ids::uuid[])                     AS id,
           unnest(@attempt_ids::uuid[])             AS attempt_id,
           unnest(@subscription_ids::uuid[])        AS subscription_id,
           unnest(@finished_at::timestamptz[])      AS finished_at,
           unnest(@status_codes::int[])             AS status_code,
           unnest(@durations_ms::int[])             AS duration_ms,
           unnest(@response_bodies::text[])         AS response_body,
           unnest(@response_truncated::boolean[])   AS response_truncated
), attempt AS (
    UPDATE webhook_delivery_attempts a
    SET finished_at = i.finished_at, status_code = i.status_code, error_class = NULL, error = NULL,
        duration_ms = i.duration_ms, response_body = NULLIF(i.response_body, ''),
        response_truncated = i.response_truncated, counted = true
    FROM input i
    WHERE a.delivery_id = i.id AND a.id = i.attempt_id
), healthy AS (
    UPDATE event_subscriptions s
    SET failing_since = NULL, last_success_at = h.finished_at
    FROM (SELECT subscription_id, max(finished_at) AS finished_at FROM input GROUP BY subscription_id) h
    WHERE s.id = h.subscription_id AND s.failing_notified_at IS NULL
      AND (s.failing_since IS NOT NULL OR s.last_success_at IS NULL OR s.last_success_at < @stale_before::timestamptz)
), notified AS (
    SELECT s.id FROM event_subscriptions s
    WHERE s.id IN (SELECT subscription_id FROM input) AND s.failing_notified_at IS NOT NULL
)
UPDATE webhook_deliveries d
SET status = 'delivered', last_status_code = i.status_code, last_error_class = NULL, last_error = NULL,
    next_retry_at = NULL, delivered_at = now(), failed_at = NULL, updated_at = now()
FROM input i
WHERE d.id = i.id
RETURNING d.subscription_id, (d.subscription_id IN (SELECT id FROM notified))::boolean AS notified;
