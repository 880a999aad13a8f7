-- name: APIUsageAddMany :exec
-- Adds a batch of request counts collected in memory. Rows whose key or
-- account has gone in the meantime are skipped.
INSERT INTO api_usage_daily (account_id, api_key_id, day, requests)
SELECT k.account_id, u.api_key_id, u.day, u.requests
FROM (
    SELECT unnest(@api_key_ids::uuid[]) AS api_key_id, unnest(@days::date[]) AS day, unnest(@requests::bigint[]) AS requests
) AS u
JOIN api_keys k ON k.id = u.api_key_id
ON CONFLICT (account_id, day, api_key_id)
DO UPDATE SET requests = api_usage_daily.requests + excluded.requests;

-- name: APIUsageByDay :many
SELECT u.day, u.api_key_id, k.key_identifier, k.label, u.requests
FROM api_usage_daily u
JOIN api_keys k ON k.id = u.api_key_id
WHERE u.account_id = @account_id::uuid AND u.day >= @since::date
ORDER BY u.day, k.key_identifier, u.api_key_id;

-- name: APIUsagePrune :execrows
DELETE FROM api_usage_daily WHERE day < @before::date;

-- name: APIKeyPruneRevoked :execrows
-- Revoked keys are kept while their usage rows may still be shown.
DELETE FROM api_keys k
WHERE k.revoked_at < @before::timestamptz
  AND NOT EXISTS (SELECT 1 FROM api_usage_daily u WHERE u.api_key_id = k.id);
