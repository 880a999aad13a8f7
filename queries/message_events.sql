-- name: MessageEventInsert :one
-- No row when the provider's event id was stored before (a duplicate).
INSERT INTO message_events (id, account_id, provider_id, provider_kind, payload_id, event_id, message_id, event_type,
                            bounce_class, recipient, recipient_hash, domain, domain_id, unlinked, classification,
                            detail, occurred_at)
VALUES (@id::uuid, @account_id::uuid, @provider_id::uuid, @provider_kind::text, sqlc.narg('payload_id')::uuid,
        @event_id::text, @message_id::text, @event_type::text, sqlc.narg('bounce_class')::text, @recipient::text,
        @recipient_hash::bytea, @domain::text, sqlc.narg('domain_id')::uuid, @unlinked::boolean,
        @classification::text, sqlc.narg('detail')::text, @occurred_at::timestamptz)
ON CONFLICT (provider_id, event_id) DO NOTHING
RETURNING id;
