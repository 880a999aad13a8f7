-- message_events and provider_payloads become range-partitioned tables
-- (docs/partitions.md): weekly partitions of message_events by occurred_at,
-- daily partitions of provider_payloads by their UUIDv7 id, each with a
-- DEFAULT partition for rows outside every range. internal/partitions
-- creates the partitions ahead of the clock and drops the expired ones
-- whole; nothing deletes these rows one by one any more (but a plan's
-- shorter retention, and the rows left in a DEFAULT partition).
--
-- The tables are converted in place, without copying their rows: each is
-- renamed to <table>_legacy, a partitioned table of the same columns takes
-- its name, and the old table is attached as its partition from MINVALUE to
-- the next boundary. Only its rows at or above that boundary (none, or a
-- handful of provider timestamps in the future) are moved, to the DEFAULT
-- partition. A CHECK constraint proves the old table's rows are all below
-- the boundary first, so the attachment does not scan it again; what costs
-- is building the indexes whose definition changes (the primary keys, which
-- must hold the partition key). The legacy partition is dropped whole once
-- its newest week is past the retention.

-- Attaches legacy to parent as its partition of every value of col below
-- upper (a literal of col's type), moving legacy's rows at or above upper
-- into parent (its DEFAULT partition) first. An empty legacy table (a new
-- database) is dropped instead. Later migrations use it too.
CREATE FUNCTION mailwatch_attach_legacy(parent regclass, legacy regclass, col text, upper text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    cols  text;
    moved bigint;
    empty boolean;
BEGIN
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', legacy) INTO empty;
    IF empty THEN
        EXECUTE format('DROP TABLE %s', legacy);
        RETURN 0;
    END IF;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
    FROM pg_attribute WHERE attrelid = parent AND attnum > 0 AND NOT attisdropped;
    EXECUTE format('CREATE TEMP TABLE mailwatch_moved ON COMMIT DROP AS SELECT %s FROM %s WITH NO DATA', cols, legacy);
    EXECUTE format('WITH m AS (DELETE FROM %s WHERE %I >= %L RETURNING %s) INSERT INTO mailwatch_moved SELECT * FROM m',
                   legacy, col, upper, cols);
    GET DIAGNOSTICS moved = ROW_COUNT;
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT mailwatch_legacy_bound CHECK (%I < %L)', legacy, col, upper);
    EXECUTE format('ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (MINVALUE) TO (%L)', parent, legacy, upper);
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT mailwatch_legacy_bound', legacy);
    EXECUTE format('INSERT INTO %s (%s) SELECT * FROM mailwatch_moved', parent, cols);
    DROP TABLE mailwatch_moved;
    RETURN moved;
END
$$;

-- The first boundary after now of a daily, weekly or monthly partition
-- series, in UTC (internal/partitions.Interval).
CREATE FUNCTION mailwatch_next_boundary(unit text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT (date_trunc(unit, now() AT TIME ZONE 'UTC') + ('1 ' || unit)::interval) AT TIME ZONE 'UTC'
$$;

-- The smallest UUIDv7 of a timestamp's millisecond (dbutil.UUIDv7Floor).
CREATE FUNCTION mailwatch_uuidv7_floor(t timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') || '70008000000000000000')::uuid
$$;

-- message_events ----------------------------------------------------------

DROP VIEW data_api.message_events;

ALTER TABLE message_events RENAME TO message_events_legacy;

-- Foreign keys into a partitioned table must name the partition key, and a
-- partition cannot be dropped while rows refer to it. Neither reference is
-- followed by a read: a suppression's source event and an event's payload
-- are kept as plain ids, which dangle once retention drops their rows.
ALTER TABLE suppressions DROP CONSTRAINT suppressions_source_event_id_fkey;
ALTER TABLE message_events_legacy DROP CONSTRAINT message_events_payload_id_fkey;

-- The dedupe key must hold the partition key: (provider_id, event_id)
-- becomes (provider_id, event_id, occurred_at), and the primary key. The
-- normalisers derive occurred_at from the payload, so a provider's retry of
-- an event has the same key (docs/partitions.md). provider_id leads, as
-- before: deleting a provider deletes its events through it. The id keeps
-- no index: nothing looks a message event up by it. (account_id,
-- recipient_hash) is dropped: no query reads it.
ALTER TABLE message_events_legacy
    DROP CONSTRAINT message_events_pkey,
    DROP CONSTRAINT message_events_provider_event_key,
    ADD CONSTRAINT message_events_legacy_pkey PRIMARY KEY (provider_id, event_id, occurred_at);
DROP INDEX message_events_recipient_idx;
ALTER INDEX message_events_domain_idx RENAME TO message_events_legacy_domain_idx;
ALTER INDEX message_events_account_idx RENAME TO message_events_legacy_account_idx;
ALTER INDEX message_events_received_idx RENAME TO message_events_legacy_received_idx;
ALTER TABLE message_events_legacy RENAME CONSTRAINT message_events_account_id_fkey TO message_events_legacy_account_id_fkey;
ALTER TABLE message_events_legacy RENAME CONSTRAINT message_events_provider_id_fkey TO message_events_legacy_provider_id_fkey;
ALTER TABLE message_events_legacy RENAME CONSTRAINT message_events_domain_id_fkey TO message_events_legacy_domain_id_fkey;

-- One row per provider event per recipient.
CREATE TABLE message_events (
    id             uuid        NOT NULL, -- UUIDv7
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_id    uuid        NOT NULL REFERENCES sending_providers (id) ON DELETE CASCADE,
    provider_kind  text        NOT NULL,
    -- The payload it came from; dangles once the payload is pruned.
    payload_id     uuid,
    -- The provider's event id, made unique per recipient: the dedupe key.
    event_id       text        NOT NULL,
    message_id     text        NOT NULL DEFAULT '',
    event_type     text        NOT NULL,
    bounce_class   text,
    recipient      text        NOT NULL,
    -- sha256 of the lower-cased recipient.
    recipient_hash bytea       NOT NULL,
    -- The sending domain: a linked domain of the provider, or what the
    -- payload named (unlinked = true, not counted in rates).
    domain         text        NOT NULL DEFAULT '',
    domain_id      uuid        REFERENCES domains (id) ON DELETE SET NULL,
    unlinked       boolean     NOT NULL DEFAULT false,
    classification text        NOT NULL DEFAULT '',
    detail         text,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT message_events_type CHECK (event_type IN ('sent', 'delivered', 'deferred', 'bounced', 'complained', 'unsubscribed', 'suppressed')),
    CONSTRAINT message_events_bounce_class CHECK (bounce_class IN ('hard', 'soft')),
    CONSTRAINT message_events_pkey PRIMARY KEY (provider_id, event_id, occurred_at)
) PARTITION BY RANGE (occurred_at);

-- Rates per (domain, provider) over a rolling window.
CREATE INDEX message_events_domain_idx ON message_events (domain_id, provider_id, occurred_at) WHERE domain_id IS NOT NULL;
-- Aggregates per account and day, and a plan's retention.
CREATE INDEX message_events_account_idx ON message_events (account_id, occurred_at);
-- The spike scheduler finds the domains that got events recently.
CREATE INDEX message_events_received_idx ON message_events (received_at) WHERE domain_id IS NOT NULL;

CREATE TABLE message_events_default PARTITION OF message_events DEFAULT;

-- Partitions are read through the table only (its policy applies there).
DROP POLICY message_events_tenant_read ON message_events_legacy;
REVOKE ALL ON message_events_legacy FROM authenticated;

SELECT mailwatch_attach_legacy('message_events', 'message_events_legacy', 'occurred_at',
                               mailwatch_next_boundary('week')::text);

ALTER TABLE message_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY message_events_tenant_read ON message_events FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (id, account_id, provider_id, provider_kind, event_id, message_id, event_type, bounce_class,
              recipient, domain, domain_id, unlinked, classification, detail, occurred_at, received_at)
    ON message_events TO authenticated;

CREATE VIEW data_api.message_events WITH (security_invoker = true) AS
    SELECT id, account_id, provider_id, provider_kind, event_id, message_id, event_type, bounce_class,
           recipient, domain, domain_id, unlinked, classification, detail, occurred_at, received_at
    FROM public.message_events;
GRANT SELECT ON data_api.message_events TO authenticated;

-- provider_payloads -------------------------------------------------------

-- A replay key must stay unique across partitions, which a partitioned
-- table cannot enforce (its unique keys hold the partition key): the keys
-- move to a table of their own, narrow rows pruned by age; the bodies stay
-- in provider_payloads, dropped a day at a time. Like provider_payloads
-- (0017), no foreign key: deleting a provider deletes its keys in the same
-- transaction, and deleting an account empties every account_id table.
CREATE TABLE provider_payload_keys (
    account_id  uuid  NOT NULL,
    provider_id uuid  NOT NULL,
    -- What makes a request unique for its scheme (0009).
    replay_key  text  NOT NULL,
    -- The payload stored with it, UUIDv7: pruning walks this index up to
    -- the cut-off's id.
    payload_id  uuid  NOT NULL,
    body_sha256 bytea NOT NULL,
    CONSTRAINT provider_payload_keys_pkey PRIMARY KEY (account_id, provider_id, replay_key)
);

CREATE INDEX provider_payload_keys_payload_idx ON provider_payload_keys (payload_id);

INSERT INTO provider_payload_keys (account_id, provider_id, replay_key, payload_id, body_sha256)
SELECT account_id, provider_id, replay_key, id, body_sha256 FROM provider_payloads;

ALTER TABLE provider_payloads RENAME TO provider_payloads_legacy;
ALTER TABLE provider_payloads_legacy DROP CONSTRAINT provider_payloads_replay_key;
ALTER INDEX provider_payloads_pkey RENAME TO provider_payloads_legacy_pkey;

-- Verified webhook bodies, kept until normalised and then for a while for
-- re-runs (0009, 0017, 0019).
CREATE TABLE provider_payloads (
    id              uuid        NOT NULL, -- UUIDv7: the partition key
    provider_id     uuid        NOT NULL,
    account_id      uuid        NOT NULL,
    replay_key      text        NOT NULL,
    body_sha256     bytea       NOT NULL,
    body            bytea       NOT NULL,
    -- The provider's event id when it is carried by a header (svix-id).
    header_event_id text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    processed_at    timestamptz,
    events          integer,
    error           text,
    attempts        smallint    NOT NULL DEFAULT 0,
    CONSTRAINT provider_payloads_pkey PRIMARY KEY (id)
) PARTITION BY RANGE (id);

CREATE TABLE provider_payloads_default PARTITION OF provider_payloads DEFAULT;

SELECT mailwatch_attach_legacy('provider_payloads', 'provider_payloads_legacy', 'id',
                               mailwatch_uuidv7_floor(mailwatch_next_boundary('day'))::text);
