-- name: MessageSpikeGetForUpdate :one
SELECT * FROM message_spikes
WHERE domain_id = @domain_id::uuid AND provider_id = @provider_id::uuid AND kind = @kind::text
FOR UPDATE;

-- name: MessageSpikeEnsure :exec
INSERT INTO message_spikes (domain_id, provider_id, kind) VALUES (@domain_id::uuid, @provider_id::uuid, @kind::text)
ON CONFLICT DO NOTHING;

-- name: MessageSpikeUpdate :exec
UPDATE message_spikes
SET active = @active::boolean, started_at = sqlc.narg('started_at')::timestamptz, ended_at = sqlc.narg('ended_at')::timestamptz,
    event_id = sqlc.narg('event_id')::uuid, rate = @rate::float8, checked_at = @checked_at::timestamptz
WHERE domain_id = @domain_id::uuid AND provider_id = @provider_id::uuid AND kind = @kind::text;

-- name: MessageEventDomainsReceivedSince :many
-- Linked domains with events stored since a time (spike scheduling).
SELECT DISTINCT domain_id::uuid FROM message_events
WHERE received_at >= @since::timestamptz AND domain_id IS NOT NULL
LIMIT @max::int;
