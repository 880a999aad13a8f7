-- Striped message-event rollup counters. The counters of 0029 and 0033 were
-- one row per key: every transaction that stored an event of one account in
-- one hour updated the same hourly rows, and took the exclusive advisory
-- lock of the account's day for the daily rows, until it committed. Writers
-- of one account ran one at a time: measured with pgbench (one account, 32
-- clients, each transaction one event then 2 ms of other work before its
-- commit), 185 to 278 transactions/s with the triggers, 3,509 to 3,933
-- without them.
--
-- Each key now has up to eight rows, its slots (slot 0 to 7): a writer adds
-- to the slot of its database connection (mailwatch_rollup_slot(), the
-- backend's pid modulo 8), so concurrent transactions on different
-- connections mostly touch different rows and different daily locks. A
-- key's count is the sum of its slots; every reader sums (they already
-- grouped and summed) and leaves out a key whose sum is zero. The same
-- pgbench run: 1,292 to 1,434 transactions/s (the writers of one slot,
-- four of the 32 clients each, still wait for each other).
--
-- Decrements (an UPDATE or DELETE of message_events) go to the writer's slot
-- too, so a slot's row may be negative while the sum over the slots stays
-- exact. A row that reaches exactly zero is still deleted. The daily row
-- triggers carry the hourly row's slot to the daily row, and the advisory
-- lock of a daily row is now (290033, hashtext(account || day || slot)):
-- the writers of one slot of an account's day still write its daily rows
-- one transaction after the other, in ascending day order.
--
-- A key whose slots cancel out (an event counted in one slot, deleted by a
-- writer of another) keeps its rows until the partition drop or a rebuild
-- removes them; readers do not list it.
--
-- providers.RebuildMessageRollups writes a recount into slot 0 and deletes
-- the range's rows of every other slot (it folds the slots back into one
-- row per key). The partition drop deletes a range's rows by time, whatever
-- their slot.

-- Writers of message_events wait for this migration to commit, then the
-- writers of the hourly and daily rows (the order the writers take them):
-- no count lands between the new keys and the new triggers. The rollup
-- tables' readers wait too (ALTER TABLE takes that lock anyway); the new
-- keys cost an index build of each table.
LOCK TABLE message_events IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE message_event_domain_hourly, message_event_account_hourly IN ACCESS EXCLUSIVE MODE;
LOCK TABLE message_event_domain_daily, message_event_account_daily IN ACCESS EXCLUSIVE MODE;

-- The slot of the current connection: stable for the connection's life.
CREATE FUNCTION mailwatch_rollup_slot() RETURNS smallint
LANGUAGE sql STABLE PARALLEL RESTRICTED AS $$ SELECT (pg_backend_pid() % 8)::smallint $$;

-- The rows as they are become slot 0. The new key ends with slot, so the
-- reads of a key prefix use the same index as before.
ALTER TABLE message_event_domain_hourly ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT message_event_domain_hourly_key,
    ADD CONSTRAINT message_event_domain_hourly_key UNIQUE NULLS NOT DISTINCT
        (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot);
ALTER TABLE message_event_account_hourly ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT message_event_account_hourly_key,
    ADD CONSTRAINT message_event_account_hourly_key UNIQUE NULLS NOT DISTINCT
        (account_id, hour, provider_kind, event_type, bounce_class, slot);
ALTER TABLE message_event_domain_daily ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT message_event_domain_daily_key,
    ADD CONSTRAINT message_event_domain_daily_key UNIQUE NULLS NOT DISTINCT
        (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot);
ALTER TABLE message_event_account_daily ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT message_event_account_daily_key,
    ADD CONSTRAINT message_event_account_daily_key UNIQUE NULLS NOT DISTINCT
        (account_id, day, provider_kind, event_type, bounce_class, slot);

-- INSERT: as in 0029, into the writer's slot.
CREATE OR REPLACE FUNCTION message_event_rollups_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
BEGIN
    PERFORM pg_advisory_xact_lock_shared(290029, hashtext(a::text))
    FROM (SELECT DISTINCT account_id AS a FROM new_rows) k;

    INSERT INTO message_event_domain_hourly AS t
        (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, date_trunc('hour', occurred_at, 'UTC'), domain, domain_id, provider_id, provider_kind,
           event_type, bounce_class, my_slot, count(*)
    FROM new_rows
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
    ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = t.n + EXCLUDED.n;

    INSERT INTO message_event_account_hourly AS t
        (account_id, hour, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, date_trunc('hour', occurred_at, 'UTC'), provider_kind, event_type, bounce_class, my_slot,
           count(*)
    FROM new_rows
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (account_id, hour, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = t.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

-- DELETE and UPDATE: as in 0029, the signed difference into the writer's
-- slot (a row of it may go negative); the rows of that slot left at zero
-- are deleted.
CREATE OR REPLACE FUNCTION message_event_rollups_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
BEGIN
    PERFORM pg_advisory_xact_lock_shared(290029, hashtext(a::text))
    FROM (SELECT DISTINCT account_id AS a FROM old_rows) k;

    IF TG_OP = 'UPDATE' THEN
        WITH d AS (
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, 1 AS s FROM new_rows
            UNION ALL
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, -1 AS s FROM old_rows)
        INSERT INTO message_event_domain_hourly AS t
            (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, my_slot,
               sum(s)
        FROM d
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        HAVING sum(s) <> 0 AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id)
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n;

        WITH d AS (
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, 1 AS s FROM new_rows
            UNION ALL
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, -1 AS s FROM old_rows)
        INSERT INTO message_event_account_hourly AS t
            (account_id, hour, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, hour, provider_kind, event_type, bounce_class, my_slot, sum(s)
        FROM d
        GROUP BY 1, 2, 3, 4, 5
        HAVING sum(s) <> 0 AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id)
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, hour, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n;
    ELSE
        WITH d AS (
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, -1 AS s FROM old_rows)
        INSERT INTO message_event_domain_hourly AS t
            (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, my_slot,
               sum(s)
        FROM d
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        HAVING sum(s) <> 0 AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id)
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n;

        WITH d AS (
            SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id,
                   provider_kind, event_type, bounce_class, -1 AS s FROM old_rows)
        INSERT INTO message_event_account_hourly AS t
            (account_id, hour, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, hour, provider_kind, event_type, bounce_class, my_slot, sum(s)
        FROM d
        GROUP BY 1, 2, 3, 4, 5
        HAVING sum(s) <> 0 AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id)
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, hour, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n;
    END IF;

    DELETE FROM message_event_domain_hourly t
    USING (SELECT DISTINCT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain FROM old_rows) k
    WHERE t.account_id = k.account_id AND t.hour = k.hour AND t.domain = k.domain AND t.slot = my_slot AND t.n = 0;
    DELETE FROM message_event_account_hourly t
    USING (SELECT DISTINCT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour FROM old_rows) k
    WHERE t.account_id = k.account_id AND t.hour = k.hour AND t.slot = my_slot AND t.n = 0;
    RETURN NULL;
END
$$;

-- The row trigger of message_event_domain_hourly: the change of the hourly
-- row's n is added to the daily row of its day and slot (both signs: a
-- slot's rows may be negative). A change of key columns is the old key's
-- removal and the new key's addition. A removal coming from a DELETE of an
-- account's hourly rows (its deletion cascading) is skipped when the
-- account is gone: its daily rows go with it, and no row may be written
-- for it.
CREATE OR REPLACE FUNCTION message_event_domain_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d   date;
    dec bigint := 0;
    inc bigint := 0;
    left_n bigint;
BEGIN
    -- A bulk change of whole days (a dropped partition's hours:
    -- internal/partitions) deletes those days' daily rows itself, in one
    -- statement, with this transaction-local flag set.
    IF current_setting('mailwatch.rollup_bulk', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        inc := NEW.n;
    ELSIF TG_OP = 'DELETE' THEN
        dec := OLD.n;
    ELSIF (NEW.account_id, NEW.hour, NEW.domain, NEW.domain_id, NEW.provider_id, NEW.provider_kind, NEW.event_type,
           NEW.bounce_class, NEW.slot) IS NOT DISTINCT FROM (OLD.account_id, OLD.hour, OLD.domain, OLD.domain_id,
           OLD.provider_id, OLD.provider_kind, OLD.event_type, OLD.bounce_class, OLD.slot) THEN
        inc := NEW.n - OLD.n;
    ELSE
        dec := OLD.n;
        inc := NEW.n;
    END IF;
    IF dec <> 0 AND (TG_OP <> 'DELETE' OR EXISTS (SELECT 1 FROM accounts a WHERE a.id = OLD.account_id)) THEN
        d := (OLD.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(OLD.account_id::text || d::text || OLD.slot::text));
        INSERT INTO message_event_domain_daily AS t
            (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
        VALUES (OLD.account_id, d, OLD.domain, OLD.domain_id, OLD.provider_id, OLD.provider_kind,
                OLD.event_type, OLD.bounce_class, OLD.slot, -dec)
        ON CONFLICT (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n INTO left_n;
        IF left_n = 0 THEN
            DELETE FROM message_event_domain_daily t
            WHERE t.account_id = OLD.account_id AND t.day = d AND t.domain = OLD.domain
              AND t.domain_id IS NOT DISTINCT FROM OLD.domain_id AND t.provider_id = OLD.provider_id
              AND t.provider_kind = OLD.provider_kind AND t.event_type = OLD.event_type
              AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class AND t.slot = OLD.slot AND t.n = 0;
        END IF;
    END IF;
    IF inc <> 0 THEN
        d := (NEW.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(NEW.account_id::text || d::text || NEW.slot::text));
        INSERT INTO message_event_domain_daily AS t
            (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
        VALUES (NEW.account_id, d, NEW.domain, NEW.domain_id, NEW.provider_id, NEW.provider_kind,
                NEW.event_type, NEW.bounce_class, NEW.slot, inc)
        ON CONFLICT (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n INTO left_n;
        IF left_n = 0 THEN
            DELETE FROM message_event_domain_daily t
            WHERE t.account_id = NEW.account_id AND t.day = d AND t.domain = NEW.domain
              AND t.domain_id IS NOT DISTINCT FROM NEW.domain_id AND t.provider_id = NEW.provider_id
              AND t.provider_kind = NEW.provider_kind AND t.event_type = NEW.event_type
              AND t.bounce_class IS NOT DISTINCT FROM NEW.bounce_class AND t.slot = NEW.slot AND t.n = 0;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- The same for message_event_account_hourly.
CREATE OR REPLACE FUNCTION message_event_account_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d   date;
    dec bigint := 0;
    inc bigint := 0;
    left_n bigint;
BEGIN
    IF current_setting('mailwatch.rollup_bulk', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        inc := NEW.n;
    ELSIF TG_OP = 'DELETE' THEN
        dec := OLD.n;
    ELSIF (NEW.account_id, NEW.hour, NEW.provider_kind, NEW.event_type, NEW.bounce_class, NEW.slot)
          IS NOT DISTINCT FROM (OLD.account_id, OLD.hour, OLD.provider_kind, OLD.event_type, OLD.bounce_class,
          OLD.slot) THEN
        inc := NEW.n - OLD.n;
    ELSE
        dec := OLD.n;
        inc := NEW.n;
    END IF;
    IF dec <> 0 AND (TG_OP <> 'DELETE' OR EXISTS (SELECT 1 FROM accounts a WHERE a.id = OLD.account_id)) THEN
        d := (OLD.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(OLD.account_id::text || d::text || OLD.slot::text));
        INSERT INTO message_event_account_daily AS t
            (account_id, day, provider_kind, event_type, bounce_class, slot, n)
        VALUES (OLD.account_id, d, OLD.provider_kind, OLD.event_type, OLD.bounce_class, OLD.slot, -dec)
        ON CONFLICT (account_id, day, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n INTO left_n;
        IF left_n = 0 THEN
            DELETE FROM message_event_account_daily t
            WHERE t.account_id = OLD.account_id AND t.day = d AND t.provider_kind = OLD.provider_kind
              AND t.event_type = OLD.event_type AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class
              AND t.slot = OLD.slot AND t.n = 0;
        END IF;
    END IF;
    IF inc <> 0 THEN
        d := (NEW.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(NEW.account_id::text || d::text || NEW.slot::text));
        INSERT INTO message_event_account_daily AS t
            (account_id, day, provider_kind, event_type, bounce_class, slot, n)
        VALUES (NEW.account_id, d, NEW.provider_kind, NEW.event_type, NEW.bounce_class, NEW.slot, inc)
        ON CONFLICT (account_id, day, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n INTO left_n;
        IF left_n = 0 THEN
            DELETE FROM message_event_account_daily t
            WHERE t.account_id = NEW.account_id AND t.day = d AND t.provider_kind = NEW.provider_kind
              AND t.event_type = NEW.event_type AND t.bounce_class IS NOT DISTINCT FROM NEW.bounce_class
              AND t.slot = NEW.slot AND t.n = 0;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- The data API's daily counts: the sum of a key's slots, keys whose slots
-- cancel out left out; same columns and grants as 0033 (slot is not
-- granted: the view does not read it).
CREATE OR REPLACE VIEW data_api.message_event_days WITH (security_invoker = true) AS
    SELECT account_id, day, provider_kind, event_type, bounce_class, sum(n)::bigint AS count
    FROM public.message_event_account_daily
    GROUP BY account_id, day, provider_kind, event_type, bounce_class
    HAVING sum(n) <> 0;
