-- Hourly counters of the events table, so that aggregates over events
-- (daily volume, type breakdown, the dashboard's last 24 hours) read a few
-- counter rows per hour instead of every raw row of the period.
--
-- The database keeps them: statement-level triggers on events add the
-- rows each INSERT statement wrote and subtract the rows each DELETE
-- statement removed, in the same transaction, so a rolled-back emit (a
-- River job that fails and is retried) leaves the counters as they were,
-- and a duplicate is refused by events' own key before it is counted.
-- Readers answer a window exactly: whole hours from these counters, the
-- partial hours at its ends from raw rows (internal/rollups.Split,
-- internal/events/counts.go). Events are immutable apart from their
-- acknowledgement, which no counter depends on: no UPDATE trigger.
--
-- account_id leads the key (tenant first, the column a distributed
-- Postgres would shard by). A counter that reaches zero is deleted.

CREATE TABLE event_counts_hourly (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    hour       timestamptz NOT NULL, -- a UTC hour: [hour, hour + 1 h)
    event_type text        NOT NULL,
    severity   text        NOT NULL,
    events     bigint      NOT NULL,
    PRIMARY KEY (account_id, hour, event_type, severity),
    CONSTRAINT event_counts_hourly_whole_hour CHECK (hour = date_trunc('hour', hour, 'UTC'))
) WITH (fillfactor = 90); -- room for the counter's updates to stay on their page (HOT)

-- Adds an INSERT statement's rows. Grouped first, so a statement of many
-- rows writes each counter once; in key order, so concurrent statements
-- lock shared counters in the same order (no deadlock between two of them).
CREATE FUNCTION event_counts_hourly_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, events)
    SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*)
    FROM new_events
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, hour, event_type, severity) DO UPDATE SET events = c.events + EXCLUDED.events;
    RETURN NULL;
END
$$;

-- Subtracts a DELETE statement's rows (retention, an account's purge), in
-- key order like the add, then drops the counters that reached zero.
-- Rows of an account deleted in this statement's transaction are skipped:
-- its counters go with it (ON DELETE CASCADE), whichever of the two
-- cascades runs first, and a counter is never written for an account that
-- is gone. The subtraction is an upsert, not an UPDATE, so that it also
-- applies on top of a counter a concurrent rebuild is inserting
-- (event_counts_hourly_rebuild).
CREATE FUNCTION event_counts_hourly_subtract() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, events)
    SELECT g.account_id, g.hour, g.event_type, g.severity, -g.n
    FROM (SELECT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity, count(*) AS n
          FROM old_events
          GROUP BY 1, 2, 3, 4) g
    WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = g.account_id)
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, hour, event_type, severity) DO UPDATE SET events = c.events + EXCLUDED.events;
    -- Every counter at zero here was just locked by the upsert above.
    DELETE FROM event_counts_hourly c
    USING (SELECT DISTINCT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity
           FROM old_events) o
    WHERE c.account_id = o.account_id AND c.hour = o.hour AND c.event_type = o.event_type
      AND c.severity = o.severity AND c.events = 0;
    RETURN NULL;
END
$$;

-- TRUNCATE events (tests, a manual reset) empties the counters too.
CREATE FUNCTION event_counts_hourly_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_counts_hourly;
    RETURN NULL;
END
$$;

-- Creating the triggers locks events against writes until this migration
-- commits, so the backfill below counts every row exactly once: a row
-- committed before the lock is backfilled, one inserted after it fires the
-- trigger.
CREATE TRIGGER event_counts_hourly_insert AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION event_counts_hourly_add();
CREATE TRIGGER event_counts_hourly_delete AFTER DELETE ON events
    REFERENCING OLD TABLE AS old_events
    FOR EACH STATEMENT EXECUTE FUNCTION event_counts_hourly_subtract();
CREATE TRIGGER event_counts_hourly_truncate AFTER TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION event_counts_hourly_truncate();

INSERT INTO event_counts_hourly (account_id, hour, event_type, severity, events)
SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, count(*)
FROM events
GROUP BY 1, 2, 3, 4;

-- Recomputes one account's counters from its raw rows (maintenance: after
-- a manual change to events, or to check them), in the caller's
-- transaction, and returns how many counters it corrected. It must run
-- at READ COMMITTED, so that each step reads what committed before it:
--
-- 1. FOR UPDATE on the account's row. Inserting an event takes FOR KEY
--    SHARE on it (the foreign key check), so this waits for every
--    transaction that inserted one of the account's events and holds new
--    inserts back until the rebuild commits. Acknowledgements (UPDATEs
--    that leave the key alone) are not held back.
-- 2. The account's counters, locked in key order (the order the triggers
--    lock them in): this waits for every DELETE of its events in flight.
--    A DELETE that starts later subtracts on top of the rebuilt counters:
--    its upsert waits for the rebuild and then applies to the new values.
-- 3. One statement recounts the raw rows and writes the difference: a
--    counter it saw is set to the recount (or deleted when none is left);
--    a counter it did not see is added, so that a negative counter a
--    concurrent DELETE wrote meanwhile is added to, not overwritten.
CREATE FUNCTION event_counts_hourly_rebuild(p_account uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'event_counts_hourly_rebuild must run at READ COMMITTED, not %',
            current_setting('transaction_isolation');
    END IF;
    PERFORM 1 FROM accounts WHERE id = p_account FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM event_counts_hourly WHERE account_id = p_account
        ORDER BY account_id, hour, event_type, severity FOR UPDATE;
    WITH recount AS (
        SELECT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity, count(*) AS events
        FROM events
        WHERE account_id = p_account
        GROUP BY 1, 2, 3, 4
    ), seen AS (
        SELECT c.hour, c.event_type, c.severity, c.events, r.events AS recount
        FROM event_counts_hourly c
        LEFT JOIN recount r USING (hour, event_type, severity)
        WHERE c.account_id = p_account
    ), fixed AS (
        UPDATE event_counts_hourly c SET events = s.recount
        FROM seen s
        WHERE c.account_id = p_account AND c.hour = s.hour AND c.event_type = s.event_type
          AND c.severity = s.severity AND s.recount IS NOT NULL AND s.recount <> s.events
        RETURNING 1
    ), gone AS (
        DELETE FROM event_counts_hourly c
        USING seen s
        WHERE c.account_id = p_account AND c.hour = s.hour AND c.event_type = s.event_type
          AND c.severity = s.severity AND s.recount IS NULL
        RETURNING 1
    ), added AS (
        INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, events)
        SELECT r.account_id, r.hour, r.event_type, r.severity, r.events
        FROM recount r
        WHERE NOT EXISTS (SELECT 1 FROM seen s
                          WHERE s.hour = r.hour AND s.event_type = r.event_type AND s.severity = r.severity)
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (account_id, hour, event_type, severity) DO UPDATE SET events = c.events + EXCLUDED.events
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM fixed) + (SELECT count(*) FROM gone) + (SELECT count(*) FROM added)
    INTO changed;
    RETURN changed;
END
$$;

-- The data API: the account's events per UTC day, type and severity (the
-- numbers of GET /api/accounts/me/events/daily-volume and type-breakdown),
-- summed from the hourly counters. Same pattern as 0010 and 0012: a read
-- policy on the account's rows, column grants, a security_invoker view.
ALTER TABLE event_counts_hourly ENABLE ROW LEVEL SECURITY;
CREATE POLICY event_counts_hourly_tenant_read ON event_counts_hourly FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, hour, event_type, severity, events) ON event_counts_hourly TO authenticated;

CREATE VIEW data_api.event_daily_counts WITH (security_invoker = true) AS
    SELECT account_id, (hour AT TIME ZONE 'UTC')::date AS day, event_type, severity, sum(events)::bigint AS events
    FROM public.event_counts_hourly
    GROUP BY account_id, (hour AT TIME ZONE 'UTC')::date, event_type, severity;

GRANT SELECT ON data_api.event_daily_counts TO authenticated;
