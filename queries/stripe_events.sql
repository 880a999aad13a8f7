-- name: StripeEventInsert :execrows
-- 0 rows: the event id was stored before (a replay).
INSERT INTO stripe_events (id, type, created, payload)
VALUES (@id::text, @type::text, @created::timestamptz, @payload::bytea)
ON CONFLICT (id) DO NOTHING;

-- name: StripeEventGetForUpdate :one
SELECT * FROM stripe_events WHERE id = @id::text FOR UPDATE;

-- name: StripeEventMarkApplied :exec
UPDATE stripe_events
SET applied_at = @applied_at::timestamptz, outcome = @outcome::text, account_id = sqlc.narg('account_id')::uuid
WHERE id = @id::text;

-- name: StripeEventDeleteAppliedBefore :execrows
-- Applied events received before the cut-off, at most max of them. Stripe
-- retries an event for three days and signs each attempt afresh, so the
-- key only has to outlive that.
DELETE FROM stripe_events WHERE id IN (
    SELECT id FROM stripe_events WHERE received_at < @before::timestamptz AND applied_at IS NOT NULL LIMIT @max::int);
