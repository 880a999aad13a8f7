-- name: AccountInsert :one
INSERT INTO accounts (id, email, password_hash)
VALUES (@id::uuid, @email::text, @password_hash::text)
RETURNING *;

-- name: AccountGetByID :one
SELECT * FROM accounts WHERE id = @id::uuid;

-- name: AccountGetByEmail :one
SELECT * FROM accounts WHERE email = @email::text;

-- name: AccountUpdate :one
UPDATE accounts
SET email = coalesce(sqlc.narg('email')::text, email),
    password_hash = coalesce(sqlc.narg('password_hash')::text, password_hash),
    updated_at = now()
WHERE id = @id::uuid
RETURNING *;

-- name: AccountDelete :execrows
DELETE FROM accounts WHERE id = @id::uuid;

-- name: AccountSetAdmin :execrows
UPDATE accounts SET is_admin = @is_admin::boolean, updated_at = now() WHERE email = @email::text;

-- name: AccountState :one
-- What authentication needs beyond the key: credentials changes,
-- suspension and deletion (internal/accounts).
SELECT id, credentials_changed_at, suspended_at, suspended_reason, deleted_at
FROM accounts WHERE id = @id::uuid;

-- name: AccountSetCredentialsChanged :one
-- A password change: tokens and sessions issued before now are refused.
-- The time comes from the API's clock, which also stamps tokens' iat.
UPDATE accounts SET credentials_changed_at = @changed_at::timestamptz WHERE id = @id::uuid
RETURNING credentials_changed_at::timestamptz;

-- name: AccountMarkDeleting :one
-- DELETE /api/accounts/me: keys stop at once; the account_delete job
-- removes the rest. Marking twice keeps the first time.
UPDATE accounts SET deleted_at = coalesce(deleted_at, now()), updated_at = now()
WHERE id = @id::uuid
RETURNING deleted_at::timestamptz;

-- name: AccountSuspend :one
UPDATE accounts SET suspended_at = now(), suspended_reason = @reason::text, updated_at = now()
WHERE id = @id::uuid AND suspended_at IS NULL AND deleted_at IS NULL
RETURNING *;

-- name: AccountUnsuspend :one
UPDATE accounts SET suspended_at = NULL, suspended_reason = NULL, updated_at = now()
WHERE id = @id::uuid AND suspended_at IS NOT NULL AND deleted_at IS NULL
RETURNING *;

-- name: AccountSearch :many
-- The admin search: an email substring (a LIKE pattern the caller has
-- escaped) or an exact id, in id order after a cursor. Bounded by max_rows.
SELECT * FROM accounts
WHERE (sqlc.narg('id')::uuid IS NULL OR id = sqlc.narg('id')::uuid)
  AND (sqlc.narg('email_like')::text IS NULL OR email LIKE sqlc.narg('email_like')::text)
  AND id > @after::uuid
ORDER BY id
LIMIT @max_rows::int;
