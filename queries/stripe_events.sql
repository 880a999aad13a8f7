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
