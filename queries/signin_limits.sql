-- name: SigninLimitLockClients :one
-- The account's row for clients it does not know, made on first use and
-- locked until the transaction ends; no row when the account is gone.
INSERT INTO signin_limits (account_id, device_hash)
SELECT a.id, ''::bytea FROM accounts a WHERE a.id = @account_id::uuid
ON CONFLICT (account_id, device_hash) DO UPDATE SET failures = signin_limits.failures
RETURNING *;

-- name: SigninLimitLockDevice :one
-- A device the account knows (a right password from it since known_since),
-- locked until the transaction ends.
SELECT * FROM signin_limits
WHERE account_id = @account_id::uuid AND device_hash = @device_hash::bytea
  AND octet_length(device_hash) = 32 AND last_success_at > @known_since::timestamptz
FOR UPDATE;

-- name: SigninLimitSave :exec
UPDATE signin_limits
SET failures = @failures::integer,
    last_failure_at = sqlc.narg('last_failure_at')::timestamptz,
    blocked_until = sqlc.narg('blocked_until')::timestamptz
WHERE account_id = @account_id::uuid AND device_hash = @device_hash::bytea;

-- name: SigninLimitRemember :exec
-- A right password came from this device: it is known to the account from
-- now on, with a full budget of its own.
INSERT INTO signin_limits (account_id, device_hash, last_success_at)
VALUES (@account_id::uuid, @device_hash::bytea, @at::timestamptz)
ON CONFLICT (account_id, device_hash) DO UPDATE
SET failures = 0, last_failure_at = NULL, blocked_until = NULL, last_success_at = EXCLUDED.last_success_at;

-- name: SigninLimitPruneDevices :execrows
-- Forgets the account's devices whose trust has lapsed and those beyond the
-- newest keep.
DELETE FROM signin_limits l
WHERE l.account_id = @account_id::uuid AND octet_length(l.device_hash) = 32
  AND (l.last_success_at IS NULL OR l.last_success_at <= @known_since::timestamptz
    OR l.device_hash NOT IN (
      SELECT d.device_hash FROM signin_limits d
      WHERE d.account_id = @account_id::uuid AND octet_length(d.device_hash) = 32
      ORDER BY d.last_success_at DESC NULLS LAST, d.device_hash
      LIMIT @keep::integer));

-- name: SigninLimitForgetDevices :execrows
-- Forgets every device the account knows (its password changed).
DELETE FROM signin_limits
WHERE account_id = @account_id::uuid AND octet_length(device_hash) = 32;
