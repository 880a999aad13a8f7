-- name: MXSetupUpsert :one
-- A new setup (or a new subdomain) starts pending with a fresh token; the
-- same subdomain again keeps its token and state.
INSERT INTO mx_setups (id, domain_id, name, token)
VALUES (@id::uuid, @domain_id::uuid, @name::text, @token::text)
ON CONFLICT (domain_id) DO UPDATE SET
    name = excluded.name,
    token = CASE WHEN mx_setups.name = excluded.name THEN mx_setups.token ELSE excluded.token END,
    state = CASE WHEN mx_setups.name = excluded.name THEN mx_setups.state ELSE 'pending' END,
    problems = CASE WHEN mx_setups.name = excluded.name THEN mx_setups.problems ELSE '{}' END,
    verified_at = CASE WHEN mx_setups.name = excluded.name THEN mx_setups.verified_at END,
    created_at = CASE WHEN mx_setups.name = excluded.name THEN mx_setups.created_at ELSE now() END,
    updated_at = now()
RETURNING *;

-- name: MXSetupGetByDomain :one
SELECT * FROM mx_setups WHERE domain_id = @domain_id::uuid;

-- name: MXSetupGetByIDForUpdate :one
SELECT * FROM mx_setups WHERE id = @id::uuid FOR UPDATE;

-- name: MXSetupStore :one
UPDATE mx_setups
SET state = @state::text, problems = @problems::text[], last_checked_at = @checked_at::timestamptz,
    verified_at = CASE WHEN @state::text = 'verified' THEN coalesce(verified_at, @checked_at::timestamptz) ELSE verified_at END,
    updated_at = now()
WHERE id = @id::uuid
RETURNING *;

-- name: MXSetupIDsToVerify :many
SELECT id FROM mx_setups WHERE state IN ('pending', 'verified', 'lost') AND id > @after::uuid ORDER BY id LIMIT @max_rows::int;

-- name: MXSetupIsVerified :one
-- Whether the SMTP listener should accept mail for a name.
SELECT EXISTS (SELECT 1 FROM mx_setups WHERE name = @name::text AND state = 'verified');
