-- name: MessageEventInsertMany :many
-- The events of a batch of payloads in one statement, so that the rollup
-- triggers run once for the batch and take their counters in one ordered
-- sweep (schema/0029_message_event_rollups.sql). The arrays have one
-- element per event, inserted in their order (the caller sorts them by
-- provider and event id, so that concurrent batches take the unique index's
-- entries in one order too). An event stored before, or earlier in the
-- batch, is skipped. '' in bounce_classes and details and the nil uuid in
-- domain_ids mean NULL. Returns the ids stored.
WITH b AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@account_ids::uuid[]) AS account_id,
           unnest(@provider_ids::uuid[]) AS provider_id, unnest(@provider_kinds::text[]) AS provider_kind,
           unnest(@payload_ids::uuid[]) AS payload_id, unnest(@event_ids::text[]) AS event_id,
           unnest(@message_ids::text[]) AS message_id, unnest(@event_types::text[]) AS event_type,
           unnest(@bounce_classes::text[]) AS bounce_class, unnest(@recipients::text[]) AS recipient,
           unnest(@recipient_hashes::bytea[]) AS recipient_hash, unnest(@domains::text[]) AS domain,
           unnest(@domain_ids::uuid[]) AS domain_id, unnest(@classifications::text[]) AS classification,
           unnest(@details::text[]) AS detail, unnest(@occurred_ats::timestamptz[]) AS occurred_at,
           generate_series(1, cardinality(@ids::uuid[])) AS ord
)
INSERT INTO message_events (id, account_id, provider_id, provider_kind, payload_id, event_id, message_id, event_type,
                            bounce_class, recipient, recipient_hash, domain, domain_id, unlinked, classification,
                            detail, occurred_at)
SELECT b.id, b.account_id, b.provider_id, b.provider_kind, b.payload_id, b.event_id, b.message_id, b.event_type,
       NULLIF(b.bounce_class, ''), b.recipient, b.recipient_hash, b.domain,
       NULLIF(b.domain_id, '00000000-0000-0000-0000-000000000000'::uuid),
       b.domain_id = '00000000-0000-0000-0000-000000000000'::uuid,
       b.classification, NULLIF(b.detail, ''), b.occurred_at
FROM b
ORDER BY b.ord
ON CONFLICT (provider_id, event_id) DO NOTHING
RETURNING id;
