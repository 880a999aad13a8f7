-- Daily counters of events, beside the hourly ones of 0030_event_rollups.sql,
-- so that a long window (the 90-day daily volume, a 30-day type breakdown)
-- reads one counter row per day, type and severity instead of per hour
-- (internal/rollups.SplitDays: raw partial hours, whole hours up to the
-- first UTC midnight, whole days, whole hours after the last midnight, raw
-- partial hours; internal/events/counts.go).
--
-- They are kept from event_counts_hourly, not from events, as the message
-- event daily rollups are (0033): a row trigger on the hourly table adds the
-- change of its events (NEW.events - OLD.events) to the row of the hour's
-- UTC day. So every writer of the hourly rows (events' statement triggers,
-- event_counts_hourly_rebuild, the partition drop's delete of a dropped
-- partition's hours) keeps the daily rows equal to the sums of their hours
-- without knowing about them. A daily row that falls back to zero is
-- deleted, as an hourly one is.
--
-- Locking: each trigger first takes the transaction-level advisory lock
-- (290036, hashtext(account_id || day)) exclusively, so the writers of one
-- account's day write its daily rows one transaction after the other. A
-- statement's hourly rows are written in key order (account and hour
-- first), so its days are taken in ascending order. (0033 uses 290033 for
-- the message event days: the two never wait for each other.)
--
-- An account's deletion cascades to the hourly and the daily rows alike; a
-- decrement whose daily row is already gone changes nothing (it never
-- inserts), so the cascades may run in either order. TRUNCATE of the hourly
-- table empties the daily table (a row trigger does not see it).

-- Writers of the hourly rows wait for this migration to commit: no hour is
-- written between the backfill's sums and the trigger's start.
LOCK TABLE event_counts_hourly IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE event_counts_daily (
    account_id uuid   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day        date   NOT NULL, -- the UTC day of the hours summed
    event_type text   NOT NULL,
    severity   text   NOT NULL,
    events     bigint NOT NULL,
    PRIMARY KEY (account_id, day, event_type, severity)
) WITH (fillfactor = 90); -- room for the counter's updates to stay on their page (HOT)

-- Adds n to the counter of (account, day, type, severity) and deletes it
-- when it reaches zero. With may_insert false (an hourly row's deletion)
-- a missing counter stays missing: the account's deletion may have
-- cascaded to the daily rows first.
CREATE FUNCTION event_counts_daily_add(p_account uuid, p_day date, p_type text, p_severity text, n bigint,
                                       may_insert boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(290036, hashtext(p_account::text || p_day::text));
    IF may_insert THEN
        INSERT INTO event_counts_daily AS t (account_id, day, event_type, severity, events)
        VALUES (p_account, p_day, p_type, p_severity, n)
        ON CONFLICT (account_id, day, event_type, severity) DO UPDATE SET events = t.events + EXCLUDED.events;
    ELSE
        UPDATE event_counts_daily t SET events = t.events + n
        WHERE t.account_id = p_account AND t.day = p_day AND t.event_type = p_type AND t.severity = p_severity;
    END IF;
    DELETE FROM event_counts_daily t
    WHERE t.account_id = p_account AND t.day = p_day AND t.event_type = p_type AND t.severity = p_severity
      AND t.events = 0;
END
$$;

-- The row trigger of event_counts_hourly. The hourly writers change events
-- only; a change of key columns would be the old key's removal and the new
-- key's addition all the same.
CREATE FUNCTION event_counts_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A bulk change of whole days (a dropped partition's hours:
    -- internal/partitions) deletes those days' daily rows itself, in one
    -- statement, with this transaction-local flag set.
    IF current_setting('mailwatch.rollup_bulk', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.account_id, NEW.hour, NEW.event_type, NEW.severity)
                            = (OLD.account_id, OLD.hour, OLD.event_type, OLD.severity) THEN
        PERFORM event_counts_daily_add(NEW.account_id, (NEW.hour AT TIME ZONE 'UTC')::date, NEW.event_type,
                                       NEW.severity, NEW.events - OLD.events, true);
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM event_counts_daily_add(OLD.account_id, (OLD.hour AT TIME ZONE 'UTC')::date, OLD.event_type,
                                       OLD.severity, -OLD.events, false);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM event_counts_daily_add(NEW.account_id, (NEW.hour AT TIME ZONE 'UTC')::date, NEW.event_type,
                                       NEW.severity, NEW.events, true);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER event_counts_daily_apply AFTER INSERT OR UPDATE OR DELETE ON event_counts_hourly
    FOR EACH ROW EXECUTE FUNCTION event_counts_daily_apply();

CREATE FUNCTION event_counts_daily_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE event_counts_daily;
    RETURN NULL;
END
$$;

CREATE TRIGGER event_counts_daily_truncate AFTER TRUNCATE ON event_counts_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION event_counts_daily_truncate();

-- The backfill, from the hourly rows as they are now.
INSERT INTO event_counts_daily (account_id, day, event_type, severity, events)
SELECT account_id, (hour AT TIME ZONE 'UTC')::date, event_type, severity, sum(events)
FROM event_counts_hourly
GROUP BY 1, 2, 3, 4
HAVING sum(events) <> 0;

-- The rebuild of 0030, which now recounts the account's daily rows too.
-- Steps 1 to 3 are 0030's. Between 2 and 3, the account's days (those of
-- its hourly and its daily rows) are locked in ascending order, the order
-- the row trigger takes them in, after the hourly rows as the trigger
-- does. Step 3's hourly changes update the daily rows through the row
-- trigger; step 4 then sets every daily row of the account to the sum of
-- its hours (deleting those without), which corrects a drift of the daily
-- rows themselves. The count returned is of both kinds of rows corrected.
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
        ORDER BY account_id, hour, event_type, severity FOR UPDATE;
    FOR d IN
        SELECT (hour AT TIME ZONE 'UTC')::date FROM event_counts_hourly WHERE account_id = p_account
        UNION
        SELECT day FROM event_counts_daily WHERE account_id = p_account
        ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(290036, hashtext(p_account::text || d::text));
    END LOOP;
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
    WITH fresh AS MATERIALIZED (
        SELECT (hour AT TIME ZONE 'UTC')::date AS day, event_type, severity, sum(events)::bigint AS events
        FROM event_counts_hourly
        WHERE account_id = p_account
        GROUP BY 1, 2, 3
        HAVING sum(events) <> 0
    ), written AS (
        INSERT INTO event_counts_daily AS t (account_id, day, event_type, severity, events)
        SELECT p_account, f.day, f.event_type, f.severity, f.events
        FROM fresh f
        ORDER BY 2, 3, 4
        ON CONFLICT (account_id, day, event_type, severity)
            DO UPDATE SET events = EXCLUDED.events WHERE t.events <> EXCLUDED.events
        RETURNING 1
    ), deleted AS (
        DELETE FROM event_counts_daily t
        WHERE t.account_id = p_account
          AND NOT EXISTS (SELECT 1 FROM fresh f
                          WHERE f.day = t.day AND f.event_type = t.event_type AND f.severity = t.severity)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM written) + (SELECT count(*) FROM deleted) INTO daily;
    RETURN changed + daily;
END
$$;

-- The data API's event_daily_counts (0030) reads the daily counters: same
-- columns, same policy and grants as the hourly ones have.
ALTER TABLE event_counts_daily ENABLE ROW LEVEL SECURITY;
CREATE POLICY event_counts_daily_tenant_read ON event_counts_daily FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, day, event_type, severity, events) ON event_counts_daily TO authenticated;

CREATE OR REPLACE VIEW data_api.event_daily_counts WITH (security_invoker = true) AS
    SELECT account_id, day, event_type, severity, events
    FROM public.event_counts_daily;
