-- Counters of the work still open in an account, for the dashboard summary:
-- critical events nobody acknowledged (alerts) and webhook deliveries not
-- yet delivered, by status. Both were counted from the raw rows at every
-- summary, and both pile up with history: an unacknowledged alert outlives
-- the events' retention (internal/partitions keeps it), and failed
-- deliveries stay until their partition is dropped. The counts read index
-- entries in proportion to that backlog.
--
-- Each counter is kept per (account, UTC hour of the row's time, slot) by
-- row triggers that fire only when a row enters or leaves the open state,
-- so a read sums one row per hour and slot with something open, whatever
-- the number of rows. The hour is the partition key's hour (events:
-- created_at; deliveries: the time of the UUIDv7 id), so that a dropped
-- partition's hours are deleted with it (internal/partitions lists these
-- tables in Spec.Rollups), and rows copied back by Spec.Keep are counted
-- again by the insert trigger.
--
-- Slots (mailwatch_rollup_slot(), as in 0038 and 0039): concurrent writers
-- of one account on different connections mostly update different rows. A
-- slot's row may go negative (a writer of this slot closed a row counted in
-- another); a row that reaches zero is deleted. Readers sum the slots.
--
-- Writers take the account's shared advisory lock (290043); the rebuild
-- takes it exclusively, so it waits for the writers in flight and holds
-- back new ones of that account only, until it commits.

-- The raw tables' writers wait for this migration: no row changes state
-- between the counters' first rows (written at the end) and the triggers.
LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE webhook_deliveries IN SHARE ROW EXCLUSIVE MODE;

-- The time of a UUIDv7: its first 48 bits are Unix milliseconds.
CREATE FUNCTION mailwatch_uuidv7_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_timestamp(('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint / 1000.0)
$$;

CREATE TABLE alert_open_counts (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    hour       timestamptz NOT NULL,
    slot       smallint    NOT NULL,
    alerts     bigint      NOT NULL,
    PRIMARY KEY (account_id, hour, slot)
);

CREATE TABLE delivery_open_counts (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    hour       timestamptz NOT NULL,
    status     text        NOT NULL CHECK (status IN ('pending', 'retrying', 'failed')),
    slot       smallint    NOT NULL,
    deliveries bigint      NOT NULL,
    PRIMARY KEY (account_id, hour, status, slot)
);

-- Adds n to an alert counter, in the writer's slot. A decrement for an
-- account that is gone (its rows cascading away) changes nothing.
CREATE FUNCTION alert_open_counts_add(p_account uuid, p_hour timestamptz, n bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
    left_n  bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM accounts WHERE id = p_account) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(290043, hashtext(p_account::text));
    INSERT INTO alert_open_counts AS c (account_id, hour, slot, alerts)
    VALUES (p_account, p_hour, my_slot, n)
    ON CONFLICT (account_id, hour, slot) DO UPDATE SET alerts = c.alerts + EXCLUDED.alerts
    RETURNING c.alerts INTO left_n;
    IF left_n = 0 THEN
        DELETE FROM alert_open_counts WHERE account_id = p_account AND hour = p_hour AND slot = my_slot;
    END IF;
END
$$;

CREATE FUNCTION alert_open_counts_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.severity = 'critical' AND OLD.acknowledged_at IS NULL THEN
        PERFORM alert_open_counts_add(OLD.account_id, date_trunc('hour', OLD.created_at, 'UTC'), -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.severity = 'critical' AND NEW.acknowledged_at IS NULL THEN
        PERFORM alert_open_counts_add(NEW.account_id, date_trunc('hour', NEW.created_at, 'UTC'), 1);
    END IF;
    RETURN NULL;
END
$$;

-- The WHEN clauses keep every other row's cost at one comparison: the
-- function runs only for rows that are, or were, open alerts.
CREATE TRIGGER alert_open_counts_insert AFTER INSERT ON events
    FOR EACH ROW WHEN (NEW.severity = 'critical' AND NEW.acknowledged_at IS NULL)
    EXECUTE FUNCTION alert_open_counts_change();
CREATE TRIGGER alert_open_counts_update AFTER UPDATE ON events
    FOR EACH ROW WHEN ((OLD.severity = 'critical' AND OLD.acknowledged_at IS NULL)
                    OR (NEW.severity = 'critical' AND NEW.acknowledged_at IS NULL))
    EXECUTE FUNCTION alert_open_counts_change();
CREATE TRIGGER alert_open_counts_delete AFTER DELETE ON events
    FOR EACH ROW WHEN (OLD.severity = 'critical' AND OLD.acknowledged_at IS NULL)
    EXECUTE FUNCTION alert_open_counts_change();

CREATE FUNCTION delivery_open_counts_add(p_account uuid, p_hour timestamptz, p_status text, n bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
    left_n  bigint;
BEGIN
    IF p_status NOT IN ('pending', 'retrying', 'failed') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM accounts WHERE id = p_account) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(290043, hashtext(p_account::text));
    INSERT INTO delivery_open_counts AS c (account_id, hour, status, slot, deliveries)
    VALUES (p_account, p_hour, p_status, my_slot, n)
    ON CONFLICT (account_id, hour, status, slot) DO UPDATE SET deliveries = c.deliveries + EXCLUDED.deliveries
    RETURNING c.deliveries INTO left_n;
    IF left_n = 0 THEN
        DELETE FROM delivery_open_counts
        WHERE account_id = p_account AND hour = p_hour AND status = p_status AND slot = my_slot;
    END IF;
END
$$;

CREATE FUNCTION delivery_open_counts_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM delivery_open_counts_add(OLD.account_id, date_trunc('hour', mailwatch_uuidv7_time(OLD.id), 'UTC'),
                                         OLD.status, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM delivery_open_counts_add(NEW.account_id, date_trunc('hour', mailwatch_uuidv7_time(NEW.id), 'UTC'),
                                         NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$;

-- Deliveries change status at every attempt; the function runs only when
-- the status does and one side of the change is open.
CREATE TRIGGER delivery_open_counts_insert AFTER INSERT ON webhook_deliveries
    FOR EACH ROW WHEN (NEW.status <> 'delivered')
    EXECUTE FUNCTION delivery_open_counts_change();
CREATE TRIGGER delivery_open_counts_update AFTER UPDATE ON webhook_deliveries
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.account_id IS DISTINCT FROM NEW.account_id)
    EXECUTE FUNCTION delivery_open_counts_change();
CREATE TRIGGER delivery_open_counts_delete AFTER DELETE ON webhook_deliveries
    FOR EACH ROW WHEN (OLD.status <> 'delivered')
    EXECUTE FUNCTION delivery_open_counts_change();

-- TRUNCATE of the raw tables empties the counters (tests and operators).
CREATE FUNCTION alert_open_counts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE alert_open_counts;
    RETURN NULL;
END
$$;
CREATE TRIGGER alert_open_counts_truncate AFTER TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION alert_open_counts_truncate();

CREATE FUNCTION delivery_open_counts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE delivery_open_counts;
    RETURN NULL;
END
$$;
CREATE TRIGGER delivery_open_counts_truncate AFTER TRUNCATE ON webhook_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_open_counts_truncate();

-- Recounts one account's open alerts and deliveries from the raw rows into
-- slot 0, deleting its other rows, and returns how many keys (hour, or
-- hour and status) it corrected. It waits for the account's writers in
-- flight and holds back new ones until the caller commits (READ COMMITTED:
-- each statement after the lock sees what they committed).
CREATE FUNCTION open_counts_rebuild(p_account uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    alerts_fixed     bigint;
    deliveries_fixed bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'open_counts_rebuild must run at READ COMMITTED, not %', current_setting('transaction_isolation');
    END IF;
    PERFORM pg_advisory_xact_lock(290043, hashtext(p_account::text));

    WITH had AS (
        SELECT hour, sum(alerts) AS n FROM alert_open_counts WHERE account_id = p_account GROUP BY hour
    ), want AS (
        SELECT date_trunc('hour', created_at, 'UTC') AS hour, count(*) AS n FROM events
        WHERE account_id = p_account AND severity = 'critical' AND acknowledged_at IS NULL
        GROUP BY 1
    )
    SELECT count(*) INTO alerts_fixed
    FROM had FULL JOIN want USING (hour)
    WHERE coalesce(had.n, 0) <> coalesce(want.n, 0);

    WITH had AS (
        SELECT hour, status, sum(deliveries) AS n FROM delivery_open_counts WHERE account_id = p_account
        GROUP BY hour, status
    ), want AS (
        SELECT date_trunc('hour', mailwatch_uuidv7_time(id), 'UTC') AS hour, status, count(*) AS n
        FROM webhook_deliveries
        WHERE account_id = p_account AND status IN ('pending', 'retrying', 'failed')
        GROUP BY 1, 2
    )
    SELECT count(*) INTO deliveries_fixed
    FROM had FULL JOIN want USING (hour, status)
    WHERE coalesce(had.n, 0) <> coalesce(want.n, 0);

    DELETE FROM alert_open_counts WHERE account_id = p_account;
    INSERT INTO alert_open_counts (account_id, hour, slot, alerts)
    SELECT p_account, date_trunc('hour', created_at, 'UTC'), 0, count(*) FROM events
    WHERE account_id = p_account AND severity = 'critical' AND acknowledged_at IS NULL
    GROUP BY 2;

    DELETE FROM delivery_open_counts WHERE account_id = p_account;
    INSERT INTO delivery_open_counts (account_id, hour, status, slot, deliveries)
    SELECT p_account, date_trunc('hour', mailwatch_uuidv7_time(id), 'UTC'), status, 0, count(*)
    FROM webhook_deliveries
    WHERE account_id = p_account AND status IN ('pending', 'retrying', 'failed')
    GROUP BY 2, 3;

    RETURN alerts_fixed + deliveries_fixed;
END
$$;

-- The counters of the rows already there.
INSERT INTO alert_open_counts (account_id, hour, slot, alerts)
SELECT account_id, date_trunc('hour', created_at, 'UTC'), 0, count(*) FROM events
WHERE severity = 'critical' AND acknowledged_at IS NULL
GROUP BY 1, 2;

INSERT INTO delivery_open_counts (account_id, hour, status, slot, deliveries)
SELECT account_id, date_trunc('hour', mailwatch_uuidv7_time(id), 'UTC'), status, 0, count(*)
FROM webhook_deliveries
WHERE status IN ('pending', 'retrying', 'failed')
GROUP BY 1, 2, 3;

-- The data API does not expose these counters: the summary is a REST read.
