-- name: EventInsert :one
INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload, created_at)
VALUES (@id::uuid, @account_id::uuid, @event_type::text, @severity::text, sqlc.narg('domain')::text,
        @tags::text[], @payload::jsonb, @created_at::timestamptz)
RETURNING *;

-- name: EventGetByID :one
SELECT * FROM events WHERE id = @id::uuid AND account_id = @account_id::uuid;
