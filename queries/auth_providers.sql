-- name: AuthProviderInsert :one
INSERT INTO auth_providers (id, account_id, kind, name, issuer, jwks_url, audience, subject_claim, email_claim,
                            webhook_secret_ciphertext, webhook_secret_key_id)
VALUES (@id::uuid, @account_id::uuid, @kind::text, @name::text, @issuer::text, @jwks_url::text, sqlc.narg('audience')::text,
        @subject_claim::text, @email_claim::text, sqlc.narg('webhook_secret_ciphertext')::bytea, sqlc.narg('webhook_secret_key_id')::text)
RETURNING *;

-- name: AuthProviderListByAccount :many
SELECT * FROM auth_providers WHERE account_id = @account_id::uuid ORDER BY id;

-- name: AuthProviderGet :one
SELECT * FROM auth_providers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: AuthProviderGetByID :one
-- The ingress webhook finds its provider by the id in its path.
SELECT * FROM auth_providers WHERE id = @id::uuid;

-- name: AuthProviderUpdate :one
UPDATE auth_providers SET
    name = coalesce(sqlc.narg('name')::text, name),
    issuer = coalesce(sqlc.narg('issuer')::text, issuer),
    jwks_url = coalesce(sqlc.narg('jwks_url')::text, jwks_url),
    audience = CASE WHEN @set_audience::boolean THEN sqlc.narg('audience')::text ELSE audience END,
    subject_claim = coalesce(sqlc.narg('subject_claim')::text, subject_claim),
    email_claim = coalesce(sqlc.narg('email_claim')::text, email_claim),
    webhook_secret_ciphertext = CASE WHEN @set_secret::boolean THEN sqlc.narg('webhook_secret_ciphertext')::bytea ELSE webhook_secret_ciphertext END,
    webhook_secret_key_id = CASE WHEN @set_secret::boolean THEN sqlc.narg('webhook_secret_key_id')::text ELSE webhook_secret_key_id END,
    updated_at = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: AuthProviderDelete :execrows
DELETE FROM auth_providers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: AuthProviderLinkInsert :one
INSERT INTO auth_provider_links (id, provider_id, account_id, subject, email, source)
VALUES (@id::uuid, @provider_id::uuid, @account_id::uuid, sqlc.narg('subject')::text, sqlc.narg('email')::text, @source::text)
RETURNING *;

-- name: AuthProviderLinkUpsertSubject :one
-- A provider's user event: the subject's link is created or its email updated.
INSERT INTO auth_provider_links (id, provider_id, account_id, subject, email, source)
VALUES (@id::uuid, @provider_id::uuid, @account_id::uuid, @subject::text, sqlc.narg('email')::text, 'webhook')
ON CONFLICT (provider_id, subject) WHERE subject IS NOT NULL
DO UPDATE SET email = EXCLUDED.email, updated_at = now()
RETURNING *;

-- name: AuthProviderLinkList :many
SELECT * FROM auth_provider_links WHERE provider_id = @provider_id::uuid AND account_id = @account_id::uuid ORDER BY id;

-- name: AuthProviderLinkDelete :execrows
DELETE FROM auth_provider_links WHERE id = @id::uuid AND provider_id = @provider_id::uuid AND account_id = @account_id::uuid;

-- name: AuthProviderLinkDeleteBySubject :execrows
DELETE FROM auth_provider_links WHERE provider_id = @provider_id::uuid AND subject = @subject::text;

-- name: AuthProviderLinkFind :one
-- The link of a verified token's subject, or else of its email, but an
-- email matches only a link made by email (no subject): a link pinned to a
-- subject is never reached by another user of the provider with that email.
SELECT account_id FROM auth_provider_links
WHERE provider_id = @provider_id::uuid
  AND (subject = sqlc.narg('subject')::text OR (subject IS NULL AND email = sqlc.narg('email')::text))
ORDER BY (subject = sqlc.narg('subject')::text) DESC NULLS LAST
LIMIT 1;

-- name: AuthProviderWebhookEventInsert :execrows
-- Zero rows: the provider's event was already applied.
INSERT INTO auth_provider_webhook_events (provider_id, event_id, event_type)
VALUES (@provider_id::uuid, @event_id::text, @event_type::text)
ON CONFLICT DO NOTHING;

-- name: AuthProviderGetByAccountIssuer :one
-- The provider a data-API request's named account has for a token's
-- issuer (at most one: auth_providers_account_issuer_key).
SELECT * FROM auth_providers WHERE account_id = @account_id::uuid AND issuer = @issuer::text;

-- name: AuthProviderCountByAccount :one
SELECT count(*) FROM auth_providers WHERE account_id = @account_id::uuid;
