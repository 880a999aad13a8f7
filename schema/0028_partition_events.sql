-- events, webhook_deliveries and webhook_delivery_attempts become
-- range-partitioned tables (docs/partitions.md), converted in place as
-- message_events was (0027, mailwatch_attach_legacy):
--
-- * events by created_at, a week per partition. Retention drops a week
--   whole once it is past EVENT_RETENTION_DAYS; its unacknowledged alerts
--   are copied back first (into the DEFAULT partition).
-- * webhook_deliveries by id (UUIDv7, made when the delivery is), a week per
--   partition: every read of a delivery is by id (the push worker, the
--   reconciler, a manual retry), so each reads one partition.
-- * webhook_delivery_attempts by delivery_id, with the same bounds as the
--   deliveries: a delivery's attempts are in the partition of the same week,
--   read by delivery id, and go before it.

-- events ------------------------------------------------------------------

DROP VIEW data_api.events;

ALTER TABLE events RENAME TO events_legacy;

-- A delivery's event is never read through the key: the delivery carries
-- its body. Kept, it would need the event's created_at in every delivery,
-- and a week of events could only be dropped once no delivery referred to
-- it. Deleting an event (a plan's retention) deletes its deliveries in the
-- same statement instead (EventPruneBatch); dropping a week of events
-- leaves its deliveries to their own week's drop.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;

-- The primary key must hold created_at: (account_id, created_at, id), the
-- listing's order, replaces both the key on id and the listing index. The
-- id keeps an index of its own (an alert is acknowledged by id). Retention
-- no longer scans by created_at across accounts (a plan's accounts are
-- pruned through their own keys, the rest by dropping partitions).
CREATE UNIQUE INDEX events_legacy_pkey ON events_legacy (account_id, created_at, id);
CREATE INDEX events_legacy_id_idx ON events_legacy (id);
ALTER TABLE events_legacy
    DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_legacy_pkey PRIMARY KEY USING INDEX events_legacy_pkey;
DROP INDEX events_account_created_idx;
DROP INDEX events_created_idx;
ALTER INDEX events_account_type_created_idx RENAME TO events_legacy_account_type_created_idx;
ALTER INDEX events_account_alerts_idx RENAME TO events_legacy_account_alerts_idx;
ALTER INDEX events_account_unacked_alerts_idx RENAME TO events_legacy_account_unacked_alerts_idx;
ALTER TABLE events_legacy RENAME CONSTRAINT events_account_id_fkey TO events_legacy_account_id_fkey;

-- The event log every part of mailwatch writes to (0002). An event whose
-- severity is critical is an alert; its acknowledgement state lives on the
-- row.
CREATE TABLE events (
    id                uuid        NOT NULL, -- UUIDv7: time-ordered
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    event_type        text        NOT NULL,
    severity          text        NOT NULL,
    domain            text,
    tags              text[]      NOT NULL DEFAULT '{}',
    payload           jsonb       NOT NULL,
    -- The event's API representation, written once at emit time (events
    -- are immutable): listings send it without decoding every column.
    rendered          text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    acknowledged_at   timestamptz,
    acknowledged_by   text,
    acknowledged_note text,
    acknowledged_key  text,
    CONSTRAINT events_severity_check CHECK (severity IN ('info', 'warning', 'critical')),
    CONSTRAINT events_ack_only_alerts CHECK (acknowledged_at IS NULL OR severity = 'critical'),
    CONSTRAINT events_pkey PRIMARY KEY (account_id, created_at, id)
) PARTITION BY RANGE (created_at);

-- An event by id (acknowledging an alert): one probe per partition.
CREATE INDEX events_id_idx ON events (id);
-- Listing by type; the primary key lists every type.
CREATE INDEX events_account_type_created_idx ON events (account_id, event_type, created_at, id);
-- Alerts, and the unacknowledged ones the dashboard counts.
CREATE INDEX events_account_alerts_idx ON events (account_id, created_at, id) WHERE severity = 'critical';
CREATE INDEX events_account_unacked_alerts_idx ON events (account_id, created_at, id)
    WHERE severity = 'critical' AND acknowledged_at IS NULL;

CREATE TABLE events_default PARTITION OF events DEFAULT;

DROP POLICY events_tenant_read ON events_legacy;
REVOKE ALL ON events_legacy FROM authenticated;

SELECT mailwatch_attach_legacy('events', 'events_legacy', 'created_at', mailwatch_next_boundary('week')::text);

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
CREATE POLICY events_tenant_read ON events FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (id, account_id, event_type, severity, domain, tags, payload, created_at, acknowledged_at,
              acknowledged_by, acknowledged_note) ON events TO authenticated;

CREATE VIEW data_api.events WITH (security_invoker = true) AS
    SELECT id, account_id, event_type, severity, domain, tags, payload, created_at, acknowledged_at,
           acknowledged_by, acknowledged_note,
           acknowledged_note AS note
    FROM public.events;
GRANT SELECT ON data_api.events TO authenticated;

-- webhook_deliveries and webhook_delivery_attempts ------------------------

DROP VIEW data_api.deliveries;

ALTER TABLE webhook_delivery_attempts RENAME TO webhook_delivery_attempts_legacy;
ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_legacy;

-- The attempts' key must hold delivery_id: (delivery_id, id) replaces the
-- key on id and the index on (delivery_id, started_at); a delivery's
-- attempts are few, sorted when listed.
CREATE UNIQUE INDEX webhook_delivery_attempts_legacy_pkey ON webhook_delivery_attempts_legacy (delivery_id, id);
ALTER TABLE webhook_delivery_attempts_legacy
    DROP CONSTRAINT webhook_delivery_attempts_pkey,
    ADD CONSTRAINT webhook_delivery_attempts_legacy_pkey PRIMARY KEY USING INDEX webhook_delivery_attempts_legacy_pkey;
DROP INDEX webhook_delivery_attempts_delivery_idx;
-- Its key references the old deliveries table; attaching the partition
-- gives it the partitioned table's key instead.
ALTER TABLE webhook_delivery_attempts_legacy DROP CONSTRAINT webhook_delivery_attempts_delivery_id_fkey;

ALTER INDEX webhook_deliveries_pkey RENAME TO webhook_deliveries_legacy_pkey;
ALTER INDEX webhook_deliveries_account_idx RENAME TO webhook_deliveries_legacy_account_idx;
ALTER INDEX webhook_deliveries_account_status_idx RENAME TO webhook_deliveries_legacy_account_status_idx;
ALTER INDEX webhook_deliveries_subscription_idx RENAME TO webhook_deliveries_legacy_subscription_idx;
ALTER INDEX webhook_deliveries_event_idx RENAME TO webhook_deliveries_legacy_event_idx;
ALTER INDEX webhook_deliveries_open_idx RENAME TO webhook_deliveries_legacy_open_idx;
ALTER TABLE webhook_deliveries_legacy RENAME CONSTRAINT webhook_deliveries_account_id_fkey TO webhook_deliveries_legacy_account_id_fkey;
ALTER TABLE webhook_deliveries_legacy RENAME CONSTRAINT webhook_deliveries_subscription_id_fkey TO webhook_deliveries_legacy_subscription_id_fkey;

-- One delivery row and one River job per (event, subscription) (0003).
CREATE TABLE webhook_deliveries (
    id               uuid        NOT NULL, -- UUIDv7; also the webhook-id header; the partition key
    account_id       uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    subscription_id  uuid        NOT NULL REFERENCES event_subscriptions (id) ON DELETE CASCADE,
    -- The event pushed; dangles once the event's week is dropped.
    event_id         uuid        NOT NULL,
    event_type       text        NOT NULL,
    -- The exact bytes pushed on every attempt (webhook.Payload).
    body             bytea       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 10,
    last_status_code integer,
    last_error_class text,
    last_error       text,
    next_retry_at    timestamptz,
    -- The River job that owns the delivery now.
    job_id           bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    failed_at        timestamptz,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id)
) PARTITION BY RANGE (id);

CREATE INDEX webhook_deliveries_account_idx ON webhook_deliveries (account_id, id);
CREATE INDEX webhook_deliveries_account_status_idx ON webhook_deliveries (account_id, status, id);
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);
-- The reconciler scans the rows that are still in flight.
CREATE INDEX webhook_deliveries_open_idx ON webhook_deliveries (updated_at) WHERE status IN ('pending', 'retrying');

CREATE TABLE webhook_deliveries_default PARTITION OF webhook_deliveries DEFAULT;

-- One row per push attempt (0003).
CREATE TABLE webhook_delivery_attempts (
    id                 uuid        NOT NULL,
    delivery_id        uuid        NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    job_id             bigint,
    job_attempt        integer,
    started_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    status_code        integer,
    error_class        text,
    error              text,
    duration_ms        integer,
    response_body      text,
    response_truncated boolean     NOT NULL DEFAULT false,
    -- false for a push that did not use an attempt (429/503 with
    -- Retry-After, worker shutdown).
    counted            boolean     NOT NULL DEFAULT true,
    CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (delivery_id, id)
) PARTITION BY RANGE (delivery_id);

CREATE TABLE webhook_delivery_attempts_default PARTITION OF webhook_delivery_attempts DEFAULT;

DROP POLICY webhook_deliveries_tenant_read ON webhook_deliveries_legacy;
REVOKE ALL ON webhook_deliveries_legacy FROM authenticated;

-- Deliveries first: the attempts' foreign key references the deliveries'
-- partitions, the legacy one included.
SELECT mailwatch_attach_legacy('webhook_deliveries', 'webhook_deliveries_legacy', 'id',
                               mailwatch_uuidv7_floor(mailwatch_next_boundary('week'))::text);
SELECT mailwatch_attach_legacy('webhook_delivery_attempts', 'webhook_delivery_attempts_legacy', 'delivery_id',
                               mailwatch_uuidv7_floor(mailwatch_next_boundary('week'))::text);

ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhook_deliveries_tenant_read ON webhook_deliveries FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (id, account_id, subscription_id, event_id, event_type, status, attempts, max_attempts,
              last_status_code, last_error, next_retry_at, created_at, updated_at, delivered_at, failed_at)
    ON webhook_deliveries TO authenticated;

CREATE VIEW data_api.deliveries WITH (security_invoker = true) AS
    SELECT id, account_id, subscription_id, event_id, event_type, status, attempts, max_attempts,
           last_status_code, last_error, next_retry_at, created_at, updated_at, delivered_at, failed_at
    FROM public.webhook_deliveries;
GRANT SELECT ON data_api.deliveries TO authenticated;
