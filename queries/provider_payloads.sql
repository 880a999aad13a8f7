-- name: ProviderPayloadGetByReplayKey :one
SELECT id, body_sha256 FROM provider_payloads WHERE provider_id = @provider_id::uuid AND replay_key = @replay_key::text;

-- name: ProviderPayloadGetByID :one
SELECT * FROM provider_payloads WHERE id = @id::uuid;

-- name: ProviderPayloadMarkProcessed :exec
UPDATE provider_payloads SET processed_at = @now::timestamptz, events = @events::int, error = sqlc.narg('error')::text
WHERE id = @id::uuid;

-- name: ProviderPayloadDeleteProcessedBefore :execrows
-- Ids are UUIDv7: before_id is the smallest id of the cut-off's millisecond.
DELETE FROM provider_payloads WHERE id IN (
    SELECT id FROM provider_payloads WHERE id < @before_id::uuid AND processed_at IS NOT NULL LIMIT @max::int);

-- name: ProviderPayloadDeleteOrphan :exec
-- A payload stored while its provider was being deleted.
DELETE FROM provider_payloads p WHERE p.id = @id::uuid
  AND NOT EXISTS (SELECT 1 FROM sending_providers s WHERE s.id = p.provider_id);

-- name: ProviderPayloadDeleteByProvider :exec
DELETE FROM provider_payloads WHERE provider_id = @provider_id::uuid;

-- name: ProviderPayloadInsertMany :many
-- A batch of payloads in one statement; returns the ids stored. A replay
-- key seen before (or twice in the batch) is skipped, and so is a payload
-- whose provider was deleted meanwhile. The arrays have one element per
-- payload; '' in header_event_ids means none.
WITH batch AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@provider_ids::uuid[]) AS provider_id,
           unnest(@account_ids::uuid[]) AS account_id, unnest(@replay_keys::text[]) AS replay_key,
           unnest(@body_sha256s::bytea[]) AS body_sha256, unnest(@bodies::bytea[]) AS body,
           unnest(@header_event_ids::text[]) AS header_event_id
)
INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body, header_event_id)
SELECT b.id, b.provider_id, b.account_id, b.replay_key, b.body_sha256, b.body, NULLIF(b.header_event_id, '')
FROM batch b
WHERE EXISTS (SELECT 1 FROM sending_providers p WHERE p.id = b.provider_id)
ON CONFLICT (provider_id, replay_key) DO NOTHING
RETURNING id;

-- name: ProviderPayloadMarkFailed :one
-- Counts a failed normalisation of an unprocessed payload and keeps its
-- reason; at max_attempts the payload is given up (processed, with the
-- error). Returns the attempts made and whether it was given up.
UPDATE provider_payloads
SET attempts = attempts + 1, error = @error::text,
    processed_at = CASE WHEN attempts + 1 >= @max_attempts::int THEN @now::timestamptz END
WHERE id = @id::uuid AND processed_at IS NULL
RETURNING attempts::int AS attempts, (processed_at IS NOT NULL)::boolean AS given_up;
