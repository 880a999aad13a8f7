-- name: MessageEventNormalise :many
-- Stores the events of a batch of payloads, suppresses the recipients of
-- the new hard bounces and complaints, and marks the payloads processed, in
-- one statement: the rollup triggers (schema/0029_message_event_rollups.sql)
-- run once, at its end, and take the account's counters in one ordered
-- sweep, which the transaction then holds only until it commits.
--
-- The event arrays have one element per event, inserted in their order (the
-- caller sorts them by provider and event id, so that concurrent batches
-- take the unique index's entries in one order too); an event stored
-- before, or earlier in the batch, is skipped. '' in bounce_classes,
-- details, domains (of suppressions) and reasons, and the nil uuid in
-- domain_ids, mean none. A suppression is made for each new event with a
-- reason, in payload order (seqs), unless the address is suppressed already.
-- processed_ids are the payloads to mark processed, with the number of their
-- events stored. Returns each new event and whether it made a suppression.
WITH b AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@account_ids::uuid[]) AS account_id,
           unnest(@provider_ids::uuid[]) AS provider_id, unnest(@provider_kinds::text[]) AS provider_kind,
           unnest(@payload_ids::uuid[]) AS payload_id, unnest(@event_ids::text[]) AS event_id,
           unnest(@message_ids::text[]) AS message_id, unnest(@event_types::text[]) AS event_type,
           unnest(@bounce_classes::text[]) AS bounce_class, unnest(@recipients::text[]) AS recipient,
           unnest(@recipient_hashes::bytea[]) AS recipient_hash, unnest(@domains::text[]) AS domain,
           unnest(@domain_ids::uuid[]) AS domain_id, unnest(@classifications::text[]) AS classification,
           unnest(@details::text[]) AS detail, unnest(@occurred_ats::timestamptz[]) AS occurred_at,
           unnest(@suppression_ids::uuid[]) AS suppression_id, unnest(@reasons::text[]) AS reason,
           unnest(@emails::text[]) AS email, unnest(@seqs::int[]) AS seq,
           generate_series(1, cardinality(@ids::uuid[])) AS ord
), ins AS (
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
    ON CONFLICT (provider_id, event_id, occurred_at) DO NOTHING
    RETURNING id, payload_id
), sup AS (
    INSERT INTO suppressions (id, account_id, email, email_hash, reason, domain, provider_id, source_event_id)
    SELECT b.suppression_id, b.account_id, b.email, b.recipient_hash, b.reason, NULLIF(b.domain, ''), b.provider_id, b.id
    FROM b JOIN ins ON ins.id = b.id
    WHERE b.reason <> ''
    ORDER BY b.seq
    ON CONFLICT (account_id, email_hash) DO NOTHING
    RETURNING source_event_id
), marked AS (
    UPDATE provider_payloads p
    SET processed_at = @now::timestamptz, events = (SELECT count(*) FROM ins WHERE ins.payload_id = p.id), error = NULL
    WHERE p.id = ANY (@processed_ids::uuid[])
    RETURNING p.id
)
SELECT ins.id, EXISTS (SELECT 1 FROM sup WHERE sup.source_event_id = ins.id) AS suppressed
FROM ins;

-- name: MessageEventPruneBatchForPlan :execrows
-- Deletes up to batch_size message events older than the cutoff of the
-- accounts on one plan (an account without a plan of its own is on the
-- default plan): the plan's own, shorter retention. Older partitions are
-- dropped whole (internal/partitions); this deletes from the ones kept.
DELETE FROM message_events
WHERE (provider_id, event_id, occurred_at) IN (
    SELECT m.provider_id, m.event_id, m.occurred_at FROM message_events m
    WHERE m.account_id IN (SELECT a.id FROM accounts a LEFT JOIN account_plans p ON p.account_id = a.id
                           WHERE coalesce(p.plan, @default_plan::text) = @plan::text)
      AND m.occurred_at < @before::timestamptz
    LIMIT @batch_size::int
);

-- name: MessageEventPruneBefore :execrows
-- Deletes up to batch_size message events older than the cutoff; the job
-- passes a cutoff below every range partition (partitions.PruneBefore),
-- so this only empties the DEFAULT partition of expired rows.
DELETE FROM message_events
WHERE (provider_id, event_id, occurred_at) IN (
    SELECT provider_id, event_id, occurred_at FROM message_events
    WHERE occurred_at < @before::timestamptz
    LIMIT @batch_size::int
);
