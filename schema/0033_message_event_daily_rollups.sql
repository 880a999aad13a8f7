-- Daily rollups of message_events, beside the hourly ones of
-- 0029_message_event_rollups.sql, so that a long window (a 90-day chart, a
-- 30-day type breakdown) reads a few rows per day instead of per hour
-- (internal/rollups.SplitDays: raw partial hours, whole hours up to the
-- first UTC midnight, whole days, whole hours after the last midnight, raw
-- partial hours).
--
-- They are kept from the hourly tables, not from message_events: a row
-- trigger on each hourly table adds the change of its n (NEW.n - OLD.n) to
-- the row of the hour's UTC day. So every writer of the hourly rows (the
-- message_events triggers, providers.RebuildMessageRollups, the partition
-- drop's delete of a dropped partition's hours) keeps the daily rows equal
-- to the sums of their hours without knowing about them. As the hourly path
-- does, a row that falls back to zero is deleted.
--
-- Locking: the daily rows are coarser than the hourly ones, and the row
-- triggers of one statement fire in the order the hourly rows were written
-- (hour first), not in the order of the daily keys, so two statements that
-- write one account's day could take its daily rows in opposite orders.
-- Each trigger first takes the transaction-level advisory lock
-- (290033, hashtext(account_id || day)) exclusively: the writers of one
-- account's day write its daily rows one transaction after the other, and a
-- statement's days are taken in ascending order (its hourly rows are
-- written in key order, account and hour first). The writers of one
-- account's hour already wait for each other on the hourly rows they share.
--
-- An account's deletion cascades to the hourly and the daily rows alike; a
-- decrement whose daily row is already gone changes nothing (it never
-- inserts), so the cascades may run in either order. TRUNCATE of an hourly
-- table empties its daily table (a row trigger does not see it).

-- Writers of the hourly rows wait for this migration to commit: no hour is
-- written between the backfill's sums and the triggers' start. The order is
-- the writers' (domain rollup first, then the account rollup).
LOCK TABLE message_event_domain_hourly, message_event_account_hourly IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE message_event_domain_daily (
    account_id    uuid   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- The UTC day of the hours summed.
    day           date   NOT NULL,
    domain        text   NOT NULL,
    domain_id     uuid,
    provider_id   uuid   NOT NULL,
    provider_kind text   NOT NULL,
    event_type    text   NOT NULL,
    bounce_class  text,
    n             bigint NOT NULL,
    CONSTRAINT message_event_domain_daily_key UNIQUE NULLS NOT DISTINCT
        (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class)
) WITH (parallel_workers = 0);

CREATE INDEX message_event_domain_daily_domain_id_idx
    ON message_event_domain_daily (account_id, domain_id, day) WHERE domain_id IS NOT NULL;
CREATE INDEX message_event_domain_daily_domain_idx ON message_event_domain_daily (account_id, domain, day);

CREATE TABLE message_event_account_daily (
    account_id    uuid   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day           date   NOT NULL,
    provider_kind text   NOT NULL,
    event_type    text   NOT NULL,
    bounce_class  text,
    n             bigint NOT NULL,
    CONSTRAINT message_event_account_daily_key UNIQUE NULLS NOT DISTINCT
        (account_id, day, provider_kind, event_type, bounce_class)
) WITH (parallel_workers = 0);

-- The row trigger of message_event_domain_hourly: dec is removed from the
-- old key's day, inc added to the new key's. The hourly writers change n
-- only; a change of key columns would be the old key's removal and the new
-- key's addition all the same.
CREATE FUNCTION message_event_domain_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d   date;
    dec bigint := 0;
    inc bigint := 0;
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
           NEW.bounce_class) IS NOT DISTINCT FROM (OLD.account_id, OLD.hour, OLD.domain, OLD.domain_id,
           OLD.provider_id, OLD.provider_kind, OLD.event_type, OLD.bounce_class) THEN
        inc := greatest(NEW.n - OLD.n, 0);
        dec := greatest(OLD.n - NEW.n, 0);
    ELSE
        dec := OLD.n;
        inc := NEW.n;
    END IF;
    IF dec <> 0 THEN
        d := (OLD.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(OLD.account_id::text || d::text));
        UPDATE message_event_domain_daily t SET n = t.n - dec
        WHERE t.account_id = OLD.account_id AND t.day = d AND t.domain = OLD.domain
          AND t.domain_id IS NOT DISTINCT FROM OLD.domain_id AND t.provider_id = OLD.provider_id
          AND t.provider_kind = OLD.provider_kind AND t.event_type = OLD.event_type
          AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class;
        DELETE FROM message_event_domain_daily t
        WHERE t.account_id = OLD.account_id AND t.day = d AND t.domain = OLD.domain
          AND t.domain_id IS NOT DISTINCT FROM OLD.domain_id AND t.provider_id = OLD.provider_id
          AND t.provider_kind = OLD.provider_kind AND t.event_type = OLD.event_type
          AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class AND t.n = 0;
    END IF;
    IF inc <> 0 THEN
        d := (NEW.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(NEW.account_id::text || d::text));
        INSERT INTO message_event_domain_daily AS t
            (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, n)
        VALUES (NEW.account_id, d, NEW.domain, NEW.domain_id, NEW.provider_id, NEW.provider_kind,
                NEW.event_type, NEW.bounce_class, inc)
        ON CONFLICT (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class)
            DO UPDATE SET n = t.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;

-- The same for message_event_account_hourly.
CREATE FUNCTION message_event_account_daily_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d   date;
    dec bigint := 0;
    inc bigint := 0;
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
    ELSIF (NEW.account_id, NEW.hour, NEW.provider_kind, NEW.event_type, NEW.bounce_class)
          IS NOT DISTINCT FROM (OLD.account_id, OLD.hour, OLD.provider_kind, OLD.event_type, OLD.bounce_class) THEN
        inc := greatest(NEW.n - OLD.n, 0);
        dec := greatest(OLD.n - NEW.n, 0);
    ELSE
        dec := OLD.n;
        inc := NEW.n;
    END IF;
    IF dec <> 0 THEN
        d := (OLD.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(OLD.account_id::text || d::text));
        UPDATE message_event_account_daily t SET n = t.n - dec
        WHERE t.account_id = OLD.account_id AND t.day = d AND t.provider_kind = OLD.provider_kind
          AND t.event_type = OLD.event_type AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class;
        DELETE FROM message_event_account_daily t
        WHERE t.account_id = OLD.account_id AND t.day = d AND t.provider_kind = OLD.provider_kind
          AND t.event_type = OLD.event_type AND t.bounce_class IS NOT DISTINCT FROM OLD.bounce_class AND t.n = 0;
    END IF;
    IF inc <> 0 THEN
        d := (NEW.hour AT TIME ZONE 'UTC')::date;
        PERFORM pg_advisory_xact_lock(290033, hashtext(NEW.account_id::text || d::text));
        INSERT INTO message_event_account_daily AS t (account_id, day, provider_kind, event_type, bounce_class, n)
        VALUES (NEW.account_id, d, NEW.provider_kind, NEW.event_type, NEW.bounce_class, inc)
        ON CONFLICT (account_id, day, provider_kind, event_type, bounce_class)
            DO UPDATE SET n = t.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_event_domain_daily_apply AFTER INSERT OR UPDATE OR DELETE ON message_event_domain_hourly
    FOR EACH ROW EXECUTE FUNCTION message_event_domain_daily_apply();
CREATE TRIGGER message_event_account_daily_apply AFTER INSERT OR UPDATE OR DELETE ON message_event_account_hourly
    FOR EACH ROW EXECUTE FUNCTION message_event_account_daily_apply();

CREATE FUNCTION message_event_daily_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'message_event_domain_hourly' THEN
        TRUNCATE message_event_domain_daily;
    ELSE
        TRUNCATE message_event_account_daily;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_event_domain_daily_truncate AFTER TRUNCATE ON message_event_domain_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION message_event_daily_truncate();
CREATE TRIGGER message_event_account_daily_truncate AFTER TRUNCATE ON message_event_account_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION message_event_daily_truncate();

-- The backfill, from the hourly rows as they are now.
INSERT INTO message_event_domain_daily
    (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, n)
SELECT account_id, (hour AT TIME ZONE 'UTC')::date, domain, domain_id, provider_id, provider_kind,
       event_type, bounce_class, sum(n)
FROM message_event_domain_hourly
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
HAVING sum(n) <> 0;

INSERT INTO message_event_account_daily (account_id, day, provider_kind, event_type, bounce_class, n)
SELECT account_id, (hour AT TIME ZONE 'UTC')::date, provider_kind, event_type, bounce_class, sum(n)
FROM message_event_account_hourly
GROUP BY 1, 2, 3, 4, 5
HAVING sum(n) <> 0;

-- The data API's daily counts read the daily rollup; same policy and grants
-- as the hourly one had (0029), same columns.
ALTER TABLE message_event_account_daily ENABLE ROW LEVEL SECURITY;
CREATE POLICY message_event_account_daily_tenant_read ON message_event_account_daily FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, day, provider_kind, event_type, bounce_class, n) ON message_event_account_daily TO authenticated;

CREATE OR REPLACE VIEW data_api.message_event_days WITH (security_invoker = true) AS
    SELECT account_id, day, provider_kind, event_type, bounce_class, n AS count
    FROM public.message_event_account_daily;
