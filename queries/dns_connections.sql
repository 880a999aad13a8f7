-- name: DNSConnectionInsert :one
INSERT INTO dns_connections (id, account_id, kind, label, config, secret_ciphertext, secret_key_id, verified_at)
VALUES (@id::uuid, @account_id::uuid, @kind::text, @label::text, @config::jsonb, @secret_ciphertext::bytea, @secret_key_id::text, @verified_at::timestamptz)
RETURNING *;

-- name: DNSConnectionGetByID :one
SELECT * FROM dns_connections WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: DNSConnectionListByAccount :many
SELECT * FROM dns_connections WHERE account_id = @account_id::uuid ORDER BY id LIMIT @max::int;

-- name: DNSConnectionCountByAccount :one
SELECT count(*) FROM dns_connections WHERE account_id = @account_id::uuid;

-- name: DNSConnectionUpdate :one
UPDATE dns_connections
SET label = @label::text, config = @config::jsonb, secret_ciphertext = @secret_ciphertext::bytea,
    secret_key_id = @secret_key_id::text, verified_at = @verified_at::timestamptz, updated_at = now()
WHERE id = @id::uuid AND account_id = @account_id::uuid
RETURNING *;

-- name: DNSConnectionDelete :execrows
DELETE FROM dns_connections WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: DNSConnectionLinkUpsert :one
INSERT INTO dns_connection_links (domain_id, connection_id, zone_name, zone_id)
VALUES (@domain_id::uuid, @connection_id::uuid, @zone_name::text, @zone_id::text)
ON CONFLICT (domain_id) DO UPDATE SET connection_id = excluded.connection_id, zone_name = excluded.zone_name,
    zone_id = excluded.zone_id, created_at = now()
RETURNING *;

-- name: DNSConnectionLinkDelete :execrows
DELETE FROM dns_connection_links WHERE domain_id = @domain_id::uuid AND connection_id = @connection_id::uuid;

-- name: DNSConnectionLinkListByConnection :many
SELECT l.*, d.name AS domain_name
FROM dns_connection_links l JOIN domains d ON d.id = l.domain_id
WHERE l.connection_id = @connection_id::uuid ORDER BY d.name;

-- name: DNSConnectionLinkGetByDomain :one
SELECT l.*, c.account_id, c.kind, c.secret_ciphertext, c.secret_key_id
FROM dns_connection_links l JOIN dns_connections c ON c.id = l.connection_id
WHERE l.domain_id = @domain_id::uuid;
