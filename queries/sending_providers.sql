-- name: ProviderInsert :one
INSERT INTO sending_providers (id, account_id, kind, label, config, secret_ciphertext, secret_key_id)
VALUES (@id::uuid, @account_id::uuid, @kind::text, @label::text, @config::jsonb, @secret_ciphertext::bytea, @secret_key_id::text)
RETURNING *;

-- name: ProviderGetByID :one
SELECT * FROM sending_providers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ProviderGetForIngress :one
SELECT * FROM sending_providers WHERE id = @id::uuid;

-- name: ProviderListByAccount :many
SELECT * FROM sending_providers WHERE account_id = @account_id::uuid ORDER BY id LIMIT @max::int;

-- name: ProviderCountByAccount :one
SELECT count(*)::int FROM sending_providers WHERE account_id = @account_id::uuid;

-- name: ProviderUpdate :one
UPDATE sending_providers
SET label = @label::text, config = @config::jsonb, secret_ciphertext = @secret_ciphertext::bytea,
    secret_key_id = @secret_key_id::text, updated_at = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: ProviderDelete :execrows
DELETE FROM sending_providers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ProviderTouch :exec
UPDATE sending_providers SET last_payload_at = @now::timestamptz
WHERE id = @id::uuid AND (last_payload_at IS NULL OR last_payload_at < @stale_before::timestamptz);

-- name: ProviderLinkInsert :execrows
INSERT INTO sending_provider_links (provider_id, domain_id) VALUES (@provider_id::uuid, @domain_id::uuid)
ON CONFLICT DO NOTHING;

-- name: ProviderLinkDelete :execrows
DELETE FROM sending_provider_links WHERE provider_id = @provider_id::uuid AND domain_id = @domain_id::uuid;

-- name: ProviderLinkListDomains :many
SELECT d.id, d.name FROM sending_provider_links l JOIN domains d ON d.id = l.domain_id
WHERE l.provider_id = @provider_id::uuid ORDER BY d.name;

-- name: ProviderLinkListByProviders :many
SELECT l.provider_id, d.name FROM sending_provider_links l JOIN domains d ON d.id = l.domain_id
WHERE l.provider_id = ANY (@provider_ids::uuid[]) ORDER BY d.name;
