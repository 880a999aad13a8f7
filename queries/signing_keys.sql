-- name: SigningKeyListVerifying :many
-- Every key that may still verify a token: next, current, and retired keys
-- retired after @retired_after.
SELECT * FROM signing_keys
WHERE state <> 'retired' OR retired_at > @retired_after::timestamptz
ORDER BY created_at, id;

-- name: SigningKeyListPublic :many
SELECT kid, public_jwk FROM signing_keys
WHERE state <> 'retired' OR retired_at > @retired_after::timestamptz
ORDER BY created_at, id;

-- name: SigningKeyInsert :one
INSERT INTO signing_keys (id, kid, state, private_ciphertext, secret_key_id, public_jwk, activated_at)
VALUES (@id::uuid, @kid::text, @state::text, @private_ciphertext::bytea, @secret_key_id::text, @public_jwk::jsonb,
        sqlc.narg('activated_at')::timestamptz)
RETURNING *;

-- name: SigningKeyLockAll :exec
-- Serialises rotations (the periodic job and a first request racing it).
LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE;

-- name: SigningKeyListForRotation :many
SELECT * FROM signing_keys WHERE state <> 'retired' ORDER BY created_at, id;

-- name: SigningKeyRetire :exec
UPDATE signing_keys SET state = 'retired', retired_at = @now::timestamptz WHERE id = @id::uuid AND state = 'current';

-- name: SigningKeyPromote :exec
UPDATE signing_keys SET state = 'current', activated_at = @now::timestamptz WHERE id = @id::uuid AND state = 'next';

-- name: SigningKeyDeleteRetired :execrows
DELETE FROM signing_keys WHERE state = 'retired' AND retired_at < @before::timestamptz;
