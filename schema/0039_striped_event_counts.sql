-- Striped event counters, as 0038 striped the message-event ones. The
-- counters of 0030 and 0036 were one row per key: every transaction that
-- emitted an event of one account, type and severity in one hour updated
-- the same hourly row, and took the exclusive advisory lock of the
-- account's day (290036) for the daily rows, until it committed. One
-- account's emitters ran one at a time: measured with pgbench (one account,
-- 32 clients, each transaction one event then 2 ms of other work before its
-- commit), 159 to 221 transactions/s.
--
-- Each key now has up to eight rows, its slots (slot 0 to 7): a writer adds
-- to the slot of its database connection (mailwatch_rollup_slot() of 0038,
-- the backend's pid modulo 8), so concurrent transactions on different
-- connections mostly touch different rows and different daily locks. A
-- key's count is the sum of its slots; every reader sums and leaves out a
-- key whose sum is zero. The same pgbench run: 1,236 to 1,348
-- transactions/s (the writers of one slot, four of the 32 clients each,
-- still wait for each other).
--
-- Decrements (a DELETE of events) go to the writer's slot too, so a slot's
-- row may be negative while the sum over the slots stays exact. A row that
-- reaches exactly zero is still deleted, by an increment too (a negative
-- row brought back to zero). The daily row trigger carries the
-- hourly row's slot to the daily row, and the advisory lock of a daily row
-- is now (290036, hashtext(account || day || slot)): the writers of one
-- slot of an account's day still write its daily rows one transaction
-- after the other, in ascending day order.
--
-- A key whose slots cancel out (an event counted in one slot, deleted by a
-- writer of another) keeps its rows until the partition drop or a rebuild
-- removes them; readers do not list it.
--
-- event_counts_hourly_rebuild writes the recount into slot 0 and deletes
-- the account's rows of every other slot (it folds the slots back into one
-- row per key), and returns the keys corrected, not the rows. The
-- partition drop deletes a range's rows by time, whatever their slot.

-- Writers of events wait for this migration to commit, then the writers of
-- the hourly and daily rows (the order the writers take them): no count
-- lands between the new keys and the new triggers. The counters' readers
-- wait too (ALTER TABLE takes that lock anyway); the new keys cost an index
-- build of each table.
LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE event_counts_hourly IN ACCESS EXCLUSIVE MODE;
LOCK TABLE event_counts_daily IN ACCESS EXCLUSIVE MODE;

-- The rows as they are become slot 0. The new key ends with slot, so the
-- reads of a key prefix use the same index as before.
ALTER TABLE event_counts_hourly ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT event_counts_hourly_pkey,
    ADD PRIMARY KEY (account_id, hour, event_type, severity, slot);
ALTER TABLE event_counts_daily ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT event_counts_daily_pkey,
    ADD PRIMARY KEY (account_id, day, event_type, severity, slot);

-- INSERT: as in 0030, into the writer's slot. A slot's row may be negative
-- (a writer of this slot deleted an event counted in another), so an
-- increment may bring it to zero: such rows are deleted too.
CREATE OR REPLACE FUNCTION event_counts_hourly_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
    zeros   bigint;
BEGIN
    WITH up AS (
        INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, slot, events)
        SELECT account_id, date_trunc('hour', created_at, 'UTC'), event_type, severity, my_slot, count(*)
        FROM new_events
        GROUP BY 1, 2, 3, 4
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (account_id, hour, event_type, severity, slot) DO UPDATE SET events = c.events + EXCLUDED.events
        RETURNING c.events
    )
    SELECT count(*) FILTER (WHERE events = 0) INTO zeros FROM up;
    IF zeros > 0 THEN
        DELETE FROM event_counts_hourly c
        USING (SELECT DISTINCT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity
               FROM new_events) o
        WHERE c.account_id = o.account_id AND c.hour = o.hour AND c.event_type = o.event_type
          AND c.severity = o.severity AND c.slot = my_slot AND c.events = 0;
    END IF;
    RETURN NULL;
END
$$;

-- DELETE: as in 0030, subtracted in the writer's slot (its row may go
-- negative); the rows of that slot left at zero are deleted.
CREATE OR REPLACE FUNCTION event_counts_hourly_subtract() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
BEGIN
    INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, slot, events)
    SELECT g.account_id, g.hour, g.event_type, g.severity, my_slot, -g.n
    FROM (SELECT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity, count(*) AS n
          FROM old_events
          GROUP BY 1, 2, 3, 4) g
    WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = g.account_id)
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, hour, event_type, severity, slot) DO UPDATE SET events = c.events + EXCLUDED.events;
    -- Every counter of this slot at zero here was just locked by the upsert.
    DELETE FROM event_counts_hourly c
    USING (SELECT DISTINCT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity
           FROM old_events) o
    WHERE c.account_id = o.account_id AND c.hour = o.hour AND c.event_type = o.event_type
      AND c.severity = o.severity AND c.slot = my_slot AND c.events = 0;
    RETURN NULL;
END
$$;

-- Adds n to the daily counter of (account, day, type, severity, slot) and
-- deletes it when it reaches zero. A slot's daily row may be missing while
-- its hours are not (their sum was zero), so a decrement inserts too: with
-- may_insert false (an hourly row's deletion when its account is gone,
-- whose deletion may have cascaded to the daily rows first) a missing
-- counter stays missing.
DROP FUNCTION event_counts_daily_add(uuid, date, text, text, bigint, boolean);
CREATE FUNCTION event_counts_daily_add(p_account uuid, p_day date, p_type text, p_severity text, p_slot smallint,
                                       n bigint, may_insert boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(290036, hashtext(p_account::text || p_day::text || p_slot::text));
    IF may_insert THEN
        INSERT INTO event_counts_daily AS t (account_id, day, event_type, severity, slot, events)
        VALUES (p_account, p_day, p_type, p_severity, p_slot, n)
        ON CONFLICT (account_id, day, event_type, severity, slot) DO UPDATE SET events = t.events + EXCLUDED.events;
    ELSE
        UPDATE event_counts_daily t SET events = t.events + n
        WHERE t.account_id = p_account AND t.day = p_day AND t.event_type = p_type AND t.severity = p_severity
          AND t.slot = p_slot;
    END IF;
    DELETE FROM event_counts_daily t
    WHERE t.account_id = p_account AND t.day = p_day AND t.event_type = p_type AND t.severity = p_severity
      AND t.slot = p_slot AND t.events = 0;
END
$$;

-- The row trigger of event_counts_hourly: the change of the hourly row's
-- events goes to the daily row of its day and slot (both signs).
CREATE OR REPLACE FUNCTION event_counts_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A bulk change of whole days (a dropped partition's hours:
    -- internal/partitions) deletes those days' daily rows itself.
    IF current_setting('mailwatch.rollup_bulk', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.account_id, NEW.hour, NEW.event_type, NEW.severity, NEW.slot)
                            = (OLD.account_id, OLD.hour, OLD.event_type, OLD.severity, OLD.slot) THEN
        PERFORM event_counts_daily_add(NEW.account_id, (NEW.hour AT TIME ZONE 'UTC')::date, NEW.event_type,
                                       NEW.severity, NEW.slot, NEW.events - OLD.events, true);
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM event_counts_daily_add(OLD.account_id, (OLD.hour AT TIME ZONE 'UTC')::date, OLD.event_type,
                                       OLD.severity, OLD.slot, -OLD.events,
                                       TG_OP = 'UPDATE' OR EXISTS (SELECT 1 FROM accounts a WHERE a.id = OLD.account_id));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM event_counts_daily_add(NEW.account_id, (NEW.hour AT TIME ZONE 'UTC')::date, NEW.event_type,
                                       NEW.severity, NEW.slot, NEW.events, true);
    END IF;
    RETURN NULL;
END
$$;

-- The rebuild of 0036, its steps and locks as there, the days' advisory
-- locks taken for every slot (in day, then slot order: a writer takes its
-- one slot's days in ascending order). Step 3 writes the recount into slot
-- 0: a slot-0 counter it saw is set to the recount, one it did not see is
-- added to (a concurrent DELETE may have just inserted it, negative); the
-- counters of the other slots it saw are deleted (one a concurrent DELETE
-- writes meanwhile is added on top). Step 4 folds the daily rows the same
-- way, from the sums of their hours. Returns the keys corrected, hourly
-- and daily: those whose sum over the slots was missing or wrong, and
-- those with a nonzero sum that should have none; a fold of right sums
-- counts neither.
CREATE OR REPLACE FUNCTION event_counts_hourly_rebuild(p_account uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint;
    daily   bigint;
    d       date;
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
        ORDER BY account_id, hour, event_type, severity, slot FOR UPDATE;
    FOR d IN
        SELECT (hour AT TIME ZONE 'UTC')::date FROM event_counts_hourly WHERE account_id = p_account
        UNION
        SELECT day FROM event_counts_daily WHERE account_id = p_account
        ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(290036, hashtext(p_account::text || d::text || s::text))
        FROM generate_series(0, 7) s ORDER BY s;
    END LOOP;
    WITH recount AS MATERIALIZED (
        SELECT account_id, date_trunc('hour', created_at, 'UTC') AS hour, event_type, severity, count(*) AS events
        FROM events
        WHERE account_id = p_account
        GROUP BY 1, 2, 3, 4
    ), seen AS MATERIALIZED (
        SELECT c.hour, c.event_type, c.severity, c.slot, c.events
        FROM event_counts_hourly c
        WHERE c.account_id = p_account
    ), cur AS MATERIALIZED (
        SELECT hour, event_type, severity, sum(events) AS events FROM seen GROUP BY 1, 2, 3
    ), fixed AS (
        UPDATE event_counts_hourly c SET events = r.events
        FROM recount r, seen s
        WHERE c.account_id = p_account AND c.hour = r.hour AND c.event_type = r.event_type
          AND c.severity = r.severity AND c.slot = 0
          AND s.hour = r.hour AND s.event_type = r.event_type AND s.severity = r.severity AND s.slot = 0
          AND s.events <> r.events
    ), gone AS (
        DELETE FROM event_counts_hourly c
        USING seen s
        WHERE c.account_id = p_account AND c.hour = s.hour AND c.event_type = s.event_type
          AND c.severity = s.severity AND c.slot = s.slot
          AND (s.slot <> 0 OR NOT EXISTS (SELECT 1 FROM recount r
                                          WHERE r.hour = s.hour AND r.event_type = s.event_type
                                            AND r.severity = s.severity))
    ), added AS (
        INSERT INTO event_counts_hourly AS c (account_id, hour, event_type, severity, slot, events)
        SELECT r.account_id, r.hour, r.event_type, r.severity, 0, r.events
        FROM recount r
        WHERE NOT EXISTS (SELECT 1 FROM seen s
                          WHERE s.hour = r.hour AND s.event_type = r.event_type AND s.severity = r.severity
                            AND s.slot = 0)
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (account_id, hour, event_type, severity, slot) DO UPDATE SET events = c.events + EXCLUDED.events
    )
    SELECT (SELECT count(*) FROM recount r WHERE NOT EXISTS (
                SELECT 1 FROM cur c
                WHERE c.hour = r.hour AND c.event_type = r.event_type AND c.severity = r.severity
                  AND c.events = r.events))
         + (SELECT count(*) FROM cur c WHERE c.events <> 0 AND NOT EXISTS (
                SELECT 1 FROM recount r
                WHERE r.hour = c.hour AND r.event_type = c.event_type AND r.severity = c.severity))
    INTO changed;
    daily := event_counts_daily_fold(p_account);
    RETURN changed + daily;
END
$$;

-- Step 4 of the rebuild: sets the account's daily counters to the sums of
-- their hours, in slot 0, and deletes its daily rows of the other slots and
-- of the keys without hours. Returns the keys whose sum over the slots was
-- missing or wrong, or nonzero without hours. The caller holds the days'
-- locks.
CREATE FUNCTION event_counts_daily_fold(p_account uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    corrected bigint;
BEGIN
    WITH fresh AS MATERIALIZED (
        SELECT (hour AT TIME ZONE 'UTC')::date AS day, event_type, severity, sum(events)::bigint AS events
        FROM event_counts_hourly
        WHERE account_id = p_account
        GROUP BY 1, 2, 3
        HAVING sum(events) <> 0
    ), cur AS MATERIALIZED (
        SELECT day, event_type, severity, sum(events)::bigint AS events
        FROM event_counts_daily
        WHERE account_id = p_account
        GROUP BY 1, 2, 3
    ), written AS (
        INSERT INTO event_counts_daily AS t (account_id, day, event_type, severity, slot, events)
        SELECT p_account, f.day, f.event_type, f.severity, 0, f.events
        FROM fresh f
        ORDER BY 2, 3, 4
        ON CONFLICT (account_id, day, event_type, severity, slot)
            DO UPDATE SET events = EXCLUDED.events WHERE t.events <> EXCLUDED.events
    ), deleted AS (
        DELETE FROM event_counts_daily t
        WHERE t.account_id = p_account
          AND (t.slot <> 0 OR NOT EXISTS (SELECT 1 FROM fresh f
                                          WHERE f.day = t.day AND f.event_type = t.event_type
                                            AND f.severity = t.severity))
    )
    SELECT (SELECT count(*) FROM fresh f WHERE NOT EXISTS (
                SELECT 1 FROM cur c
                WHERE c.day = f.day AND c.event_type = f.event_type AND c.severity = f.severity
                  AND c.events = f.events))
         + (SELECT count(*) FROM cur c WHERE c.events <> 0 AND NOT EXISTS (
                SELECT 1 FROM fresh f
                WHERE f.day = c.day AND f.event_type = c.event_type AND f.severity = c.severity))
    INTO corrected;
    RETURN corrected;
END
$$;

-- The data API's daily counts: the sum of a key's slots, keys whose slots
-- cancel out left out; same columns and grants as 0036 (slot is not
-- granted: the view does not read it).
CREATE OR REPLACE VIEW data_api.event_daily_counts WITH (security_invoker = true) AS
    SELECT account_id, day, event_type, severity, sum(events)::bigint AS events
    FROM public.event_counts_daily
    GROUP BY account_id, day, event_type, severity
    HAVING sum(events) <> 0;
