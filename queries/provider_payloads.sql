-- name: ProviderPayloadGetByReplayKey :one
-- The payload stored with a replay key, and its body's hash.
SELECT payload_id AS id, body_sha256 FROM provider_payload_keys
WHERE account_id = @account_id::uuid AND provider_id = @provider_id::uuid AND replay_key = @replay_key::text;

-- name: ProviderPayloadGetByID :one
SELECT * FROM provider_payloads WHERE id = @id::uuid;

-- name: ProviderPayloadMarkProcessed :exec
UPDATE provider_payloads SET processed_at = @now::timestamptz, events = @events::int, error = sqlc.narg('error')::text
WHERE id = @id::uuid;

-- name: ProviderPayloadDeleteProcessedBefore :execrows
-- Ids are UUIDv7: before_id is the smallest id of the cut-off's millisecond.
-- The job passes a cut-off below every range partition
-- (partitions.PruneBefore): older partitions are dropped whole, so this
-- only empties the DEFAULT partition.
DELETE FROM provider_payloads WHERE id IN (
    SELECT id FROM provider_payloads WHERE id < @before_id::uuid AND processed_at IS NOT NULL LIMIT @max::int);

-- name: ProviderPayloadKeyDeleteBefore :execrows
-- Forgets the replay keys of payloads stored before the cut-off (before_id
-- as in ProviderPayloadDeleteProcessedBefore).
DELETE FROM provider_payload_keys WHERE payload_id IN (
    SELECT payload_id FROM provider_payload_keys WHERE payload_id < @before_id::uuid LIMIT @max::int);

-- name: ProviderPayloadDeleteOrphan :exec
-- A payload stored while its provider was being deleted, and its key.
WITH gone AS (
    DELETE FROM provider_payloads p WHERE p.id = @id::uuid
      AND NOT EXISTS (SELECT 1 FROM sending_providers s WHERE s.id = p.provider_id)
    RETURNING p.account_id, p.provider_id, p.replay_key
)
DELETE FROM provider_payload_keys k USING gone
WHERE k.account_id = gone.account_id AND k.provider_id = gone.provider_id AND k.replay_key = gone.replay_key;

-- name: ProviderPayloadDeleteByProvider :exec
-- The provider's payloads found through their replay keys (provider_payloads
-- has no index on provider_id); one whose key was pruned already is past
-- the retention, and goes with its partition.
WITH k AS (
    DELETE FROM provider_payload_keys WHERE account_id = @account_id::uuid AND provider_id = @provider_id::uuid
    RETURNING payload_id
)
DELETE FROM provider_payloads WHERE id IN (SELECT payload_id FROM k);

-- name: ProviderPayloadInsertMany :many
-- A batch of payloads in one statement; returns the ids stored. A replay
-- key seen before (or twice in the batch) is skipped, and so is a payload
-- whose provider was deleted meanwhile. The arrays have one element per
-- payload; '' in header_event_ids means none. The replay keys are unique in
-- provider_payload_keys (a partitioned table cannot hold a unique key
-- without its partition key): a payload is stored when its key is.
WITH batch AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@provider_ids::uuid[]) AS provider_id,
           unnest(@account_ids::uuid[]) AS account_id, unnest(@replay_keys::text[]) AS replay_key,
           unnest(@body_sha256s::bytea[]) AS body_sha256, unnest(@bodies::bytea[]) AS body,
           unnest(@header_event_ids::text[]) AS header_event_id
), keyed AS (
    INSERT INTO provider_payload_keys (account_id, provider_id, replay_key, payload_id, body_sha256)
    SELECT b.account_id, b.provider_id, b.replay_key, b.id, b.body_sha256
    FROM batch b
    WHERE EXISTS (SELECT 1 FROM sending_providers p WHERE p.id = b.provider_id)
    ON CONFLICT (account_id, provider_id, replay_key) DO NOTHING
    RETURNING payload_id
)
INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body, header_event_id)
SELECT b.id, b.provider_id, b.account_id, b.replay_key, b.body_sha256, b.body, NULLIF(b.header_event_id, '')
FROM batch b JOIN keyed k ON k.payload_id = b.id
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
