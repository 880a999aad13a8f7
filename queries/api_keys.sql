-- name: APIKeyInsert :one
INSERT INTO api_keys (id, account_id, label, key_identifier, key_hash)
VALUES (@id::uuid, @account_id::uuid, @label::text, @key_identifier::text, @key_hash::bytea)
RETURNING *;

-- name: APIKeyGetByHash :one
-- A key of an account being deleted no longer authenticates; a suspended
-- account's key does, and the guard answers 403 with the reason.
SELECT k.id, k.account_id, k.key_identifier, a.is_admin, a.suspended_at, a.suspended_reason
FROM api_keys k
JOIN accounts a ON a.id = k.account_id
WHERE k.key_hash = @key_hash::bytea AND k.revoked_at IS NULL AND a.deleted_at IS NULL;

-- name: APIKeyListByAccount :many
SELECT * FROM api_keys
WHERE account_id = @account_id::uuid AND revoked_at IS NULL
ORDER BY created_at, id;

-- name: APIKeyRevoke :one
UPDATE api_keys SET revoked_at = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid AND revoked_at IS NULL
RETURNING key_hash;

-- name: APIKeyCountActive :one
SELECT count(*) FROM api_keys WHERE account_id = @account_id::uuid AND revoked_at IS NULL;

-- name: APIKeyTouchMany :exec
-- Records last use for a batch of keys collected in memory.
UPDATE api_keys k
SET last_used_at = greatest(coalesce(k.last_used_at, u.used_at), u.used_at)
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@used_at::timestamptz[]) AS used_at) AS u
WHERE k.id = u.id;

-- name: APIKeyLockAccount :exec
-- Serialises key creation per account, so that the cap on active keys holds
-- under concurrent requests.
SELECT id FROM accounts WHERE id = @account_id::uuid FOR NO KEY UPDATE;
