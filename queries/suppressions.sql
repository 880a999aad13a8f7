-- name: SuppressionInsert :one
-- No row when the address is already suppressed (the first reason stays).
INSERT INTO suppressions (id, account_id, email, email_hash, reason, domain, provider_id, source_event_id)
VALUES (@id::uuid, @account_id::uuid, @email::text, @email_hash::bytea, @reason::text, sqlc.narg('domain')::text,
        sqlc.narg('provider_id')::uuid, sqlc.narg('source_event_id')::uuid)
ON CONFLICT (account_id, email_hash) DO NOTHING
RETURNING *;

-- name: SuppressionGetByHash :one
SELECT * FROM suppressions WHERE account_id = @account_id::uuid AND email_hash = @email_hash::bytea;

-- name: SuppressionDeleteByHash :execrows
DELETE FROM suppressions WHERE account_id = @account_id::uuid AND email_hash = @email_hash::bytea;
