-- name: WebSessionInsert :one
INSERT INTO web_sessions (id, account_id, token_hash, expires_at)
VALUES (@id::uuid, @account_id::uuid, @token_hash::bytea, @expires_at::timestamptz)
RETURNING *;

-- name: WebSessionGet :one
-- The live session of a token, with its account's email for the page header.
SELECT s.id, s.account_id, s.expires_at, s.last_seen_at, a.email, a.is_admin
FROM web_sessions s JOIN accounts a ON a.id = s.account_id
WHERE s.token_hash = @token_hash::bytea AND s.expires_at > now();

-- name: WebSessionTouch :exec
-- Sliding expiry, written at most once a minute per session.
UPDATE web_sessions SET last_seen_at = now(), expires_at = @expires_at::timestamptz
WHERE id = @id::uuid;

-- name: WebSessionDelete :execrows
DELETE FROM web_sessions WHERE token_hash = @token_hash::bytea;

-- name: WebSessionDeleteByAccount :execrows
DELETE FROM web_sessions WHERE account_id = @account_id::uuid;

-- name: WebSessionDeleteExpired :execrows
DELETE FROM web_sessions WHERE expires_at <= now();
