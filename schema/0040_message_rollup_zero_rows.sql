-- A slot's hourly message-event counter may be negative (schema 0038: a
-- writer of that slot deleted an event counted in another slot), so an
-- insert into that slot may bring it back to exactly zero. The insert
-- trigger of 0038 left such rows in place; readers skip them (they sum and
-- leave out zero sums), but they took room until the partition drop and
-- the recount checks saw rows the raw events do not explain. The trigger
-- now deletes the rows of its slot that an upsert left at zero, as the
-- event counters' trigger of 0039 does; the check costs nothing on the
-- usual path (no upsert returned zero, no DELETE runs). The daily rows'
-- triggers already delete their zero rows.

-- Existing zero rows go (the daily triggers see nothing: n was 0).
DELETE FROM message_event_domain_hourly WHERE n = 0;
DELETE FROM message_event_account_hourly WHERE n = 0;

-- INSERT: as in 0038, into the writer's slot; rows left at zero are deleted.
CREATE OR REPLACE FUNCTION message_event_rollups_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    my_slot smallint := mailwatch_rollup_slot();
    zeros   bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(290029, hashtext(a::text))
    FROM (SELECT DISTINCT account_id AS a FROM new_rows) k;

    WITH up AS (
        INSERT INTO message_event_domain_hourly AS t
            (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, date_trunc('hour', occurred_at, 'UTC'), domain, domain_id, provider_id, provider_kind,
               event_type, bounce_class, my_slot, count(*)
        FROM new_rows
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n
    )
    SELECT count(*) FILTER (WHERE n = 0) INTO zeros FROM up;
    IF zeros > 0 THEN
        DELETE FROM message_event_domain_hourly t
        USING (SELECT DISTINCT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain FROM new_rows) k
        WHERE t.account_id = k.account_id AND t.hour = k.hour AND t.domain = k.domain AND t.slot = my_slot
          AND t.n = 0;
    END IF;

    WITH up AS (
        INSERT INTO message_event_account_hourly AS t
            (account_id, hour, provider_kind, event_type, bounce_class, slot, n)
        SELECT account_id, date_trunc('hour', occurred_at, 'UTC'), provider_kind, event_type, bounce_class, my_slot,
               count(*)
        FROM new_rows
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, hour, provider_kind, event_type, bounce_class, slot)
            DO UPDATE SET n = t.n + EXCLUDED.n
        RETURNING t.n
    )
    SELECT count(*) FILTER (WHERE n = 0) INTO zeros FROM up;
    IF zeros > 0 THEN
        DELETE FROM message_event_account_hourly t
        USING (SELECT DISTINCT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour FROM new_rows) k
        WHERE t.account_id = k.account_id AND t.hour = k.hour AND t.slot = my_slot AND t.n = 0;
    END IF;
    RETURN NULL;
END
$$;
