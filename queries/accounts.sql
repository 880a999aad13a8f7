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
