-- Reads of the message-event rollups (schema/0029_message_event_rollups.sql,
-- schema/0033_message_event_daily_rollups.sql). A window is read as
-- rollups.SplitDays divides it: its whole UTC days from the daily rollups,
-- [days_from, days_to) (days_to NULL: open-ended), its whole hours before
-- the first and after the last midnight from the hourly rollups,
-- [head_hours_from, head_hours_to) and [tail_hours_from, tail_hours_to), and
-- the raw rows of its partial hours [head_from, head_to) and
-- [tail_from, tail_to), each shorter than an hour, through an index on
-- occurred_at ((account_id, occurred_at) or (domain_id, provider_id,
-- occurred_at)). Each read is one query per source rather than one UNION
-- ALL: the planner gave the union a parallel plan whose workers' start cost
-- several times the read itself. A key's rollup count is the sum of its
-- slots (schema/0038_striped_message_rollups.sql); a key whose slots sum
-- to zero has no events and is left out.
-- internal/providers/rollups.go is the only caller; it adds the answers.

-- name: MessageRollupAccountDays :many
-- An account's counters per UTC day, provider kind, outcome and bounce class.
SELECT (hour AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_account_hourly
WHERE account_id = @account_id::uuid AND ((hour >= @head_hours_from::timestamptz AND hour < @head_hours_to::timestamptz)
    OR (hour >= @tail_hours_from::timestamptz AND hour < @tail_hours_to::timestamptz))
GROUP BY 1, 2, 3, 4
HAVING sum(n) <> 0;

-- name: MessageDailyAccountDays :many
-- The same from the daily rollup, for the whole days.
SELECT day, provider_kind, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_account_daily
WHERE account_id = @account_id::uuid AND day >= @days_from::date
  AND day < coalesce(sqlc.narg('days_to')::date, 'infinity'::date)
GROUP BY 1, 2, 3, 4
HAVING sum(n) <> 0;

-- name: MessageRawAccountDays :many
-- The same from the raw rows of the partial hours.
SELECT (occurred_at AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, count(*)::bigint AS count
FROM message_events
WHERE account_id = @account_id::uuid
  AND ((occurred_at >= @head_from::timestamptz AND occurred_at < @head_to::timestamptz)
    OR (occurred_at >= @tail_from::timestamptz AND occurred_at < @tail_to::timestamptz))
GROUP BY 1, 2, 3, 4;

-- name: MessageRollupDomainNameDays :many
-- The counters of one sending domain name (linked, unlinked or of a deleted
-- domain) per UTC day, provider kind, outcome and bounce class.
SELECT (hour AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_domain_hourly
WHERE account_id = @account_id::uuid AND domain = @domain::text AND ((hour >= @head_hours_from::timestamptz AND hour < @head_hours_to::timestamptz)
    OR (hour >= @tail_hours_from::timestamptz AND hour < @tail_hours_to::timestamptz))
GROUP BY 1, 2, 3, 4
HAVING sum(n) <> 0;

-- name: MessageDailyDomainNameDays :many
-- The same from the daily rollup, for the whole days.
SELECT day, provider_kind, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_domain_daily
WHERE account_id = @account_id::uuid AND domain = @domain::text AND day >= @days_from::date
  AND day < coalesce(sqlc.narg('days_to')::date, 'infinity'::date)
GROUP BY 1, 2, 3, 4
HAVING sum(n) <> 0;

-- name: MessageRawDomainNameDays :many
-- The same from the raw rows of the partial hours.
SELECT (occurred_at AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type, bounce_class, count(*)::bigint AS count
FROM message_events
WHERE account_id = @account_id::uuid AND domain = @domain::text
  AND ((occurred_at >= @head_from::timestamptz AND occurred_at < @head_to::timestamptz)
    OR (occurred_at >= @tail_from::timestamptz AND occurred_at < @tail_to::timestamptz))
GROUP BY 1, 2, 3, 4;

-- name: MessageRollupDomainProviders :many
-- A linked domain's counters per provider, outcome and bounce class.
SELECT provider_id, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_domain_hourly
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND ((hour >= @head_hours_from::timestamptz AND hour < @head_hours_to::timestamptz)
    OR (hour >= @tail_hours_from::timestamptz AND hour < @tail_hours_to::timestamptz))
GROUP BY 1, 2, 3
HAVING sum(n) <> 0;

-- name: MessageDailyDomainProviders :many
-- The same from the daily rollup, for the whole days.
SELECT provider_id, event_type, bounce_class, sum(n)::bigint AS count
FROM message_event_domain_daily
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND day >= @days_from::date
  AND day < coalesce(sqlc.narg('days_to')::date, 'infinity'::date)
GROUP BY 1, 2, 3
HAVING sum(n) <> 0;

-- name: MessageRawDomainProviders :many
-- The same from the raw rows of the partial hours, through the
-- (domain_id, provider_id, occurred_at) index: the domain's providers are
-- found by a skip scan of the index (one probe each), then each provider's
-- partial hours are exact ranges, so the read costs the domain's events of
-- those hours, not the account's nor the domain's history.
WITH RECURSIVE providers AS (
    SELECT (SELECT m.provider_id FROM message_events m WHERE m.domain_id = @domain_id::uuid
            ORDER BY m.provider_id LIMIT 1) AS provider_id
    UNION ALL
    SELECT (SELECT m.provider_id FROM message_events m WHERE m.domain_id = @domain_id::uuid AND m.provider_id > p.provider_id
            ORDER BY m.provider_id LIMIT 1)
    FROM providers p
    WHERE p.provider_id IS NOT NULL
)
SELECT e.provider_id, e.event_type, e.bounce_class, count(*)::bigint AS count
FROM providers p
CROSS JOIN LATERAL (
    SELECT m.provider_id, m.event_type, m.bounce_class
    FROM message_events m
    WHERE m.domain_id = @domain_id::uuid AND m.provider_id = p.provider_id
      AND ((m.occurred_at >= @head_from::timestamptz AND m.occurred_at < @head_to::timestamptz)
        OR (m.occurred_at >= @tail_from::timestamptz AND m.occurred_at < @tail_to::timestamptz))
    OFFSET 0 -- kept a per-provider probe: flattened, the planner scanned the domain's whole index range
) e
WHERE p.provider_id IS NOT NULL
GROUP BY 1, 2, 3;

-- name: MessageRollupLockAccount :exec
-- The rebuild's lock on an account: the triggers of
-- schema/0029_message_event_rollups.sql take the same key shared.
SELECT pg_advisory_xact_lock(290029, hashtext((@account_id::uuid)::text));

-- name: MessageRollupRebuildDomain :one
-- Recounts an account's domain rollup of the hours in [from, until) (UTC
-- hour boundaries) from its raw rows into slot 0, and deletes the range's
-- rows of every other slot and of the keys without raw rows: the slots are
-- folded into one row per key. Returns the keys corrected: written (their
-- sum over slots was missing or wrong) and deleted (a nonzero sum without
-- raw rows); a fold of right sums counts neither.
WITH fresh AS MATERIALIZED (
    SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, domain, domain_id, provider_id, provider_kind,
           event_type, bounce_class, count(*) AS n
    FROM message_events
    WHERE account_id = @account_id::uuid AND occurred_at >= @from_hour::timestamptz AND occurred_at < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
), cur AS MATERIALIZED (
    SELECT hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n) AS n
    FROM message_event_domain_hourly
    WHERE account_id = @account_id::uuid AND hour >= @from_hour::timestamptz AND hour < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4, 5, 6, 7
), written AS (
    INSERT INTO message_event_domain_hourly AS t
        (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, 0, n
    FROM fresh
    ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (account_id, hour, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = EXCLUDED.n WHERE t.n <> EXCLUDED.n
    RETURNING 1
), deleted AS (
    DELETE FROM message_event_domain_hourly t
    WHERE t.account_id = @account_id::uuid AND t.hour >= @from_hour::timestamptz AND t.hour < @until_hour::timestamptz
      AND (t.slot <> 0 OR NOT EXISTS (
        SELECT 1 FROM fresh f
        WHERE f.hour = t.hour AND f.domain = t.domain AND f.provider_id = t.provider_id
          AND f.provider_kind = t.provider_kind AND f.event_type = t.event_type
          AND f.domain_id IS NOT DISTINCT FROM t.domain_id AND f.bounce_class IS NOT DISTINCT FROM t.bounce_class))
    RETURNING 1
)
SELECT (SELECT count(*) FROM fresh f WHERE NOT EXISTS (
            SELECT 1 FROM cur c
            WHERE c.hour = f.hour AND c.domain = f.domain AND c.provider_id = f.provider_id
              AND c.provider_kind = f.provider_kind AND c.event_type = f.event_type
              AND c.domain_id IS NOT DISTINCT FROM f.domain_id AND c.bounce_class IS NOT DISTINCT FROM f.bounce_class
              AND c.n = f.n))::bigint AS written,
       (SELECT count(*) FROM cur c WHERE c.n <> 0 AND NOT EXISTS (
            SELECT 1 FROM fresh f
            WHERE f.hour = c.hour AND f.domain = c.domain AND f.provider_id = c.provider_id
              AND f.provider_kind = c.provider_kind AND f.event_type = c.event_type
              AND f.domain_id IS NOT DISTINCT FROM c.domain_id AND f.bounce_class IS NOT DISTINCT FROM c.bounce_class)
       )::bigint AS deleted;


-- name: MessageRollupRebuildAccount :one
-- Recounts an account's account-level rollup of the hours in [from, until)
-- from its domain rollup (rebuilt first, in the same transaction), the same
-- way: into slot 0, the other slots' rows deleted.
WITH fresh AS MATERIALIZED (
    SELECT account_id, hour, provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_domain_hourly
    WHERE account_id = @account_id::uuid AND hour >= @from_hour::timestamptz AND hour < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(n) <> 0
), cur AS MATERIALIZED (
    SELECT hour, provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_account_hourly
    WHERE account_id = @account_id::uuid AND hour >= @from_hour::timestamptz AND hour < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4
), written AS (
    INSERT INTO message_event_account_hourly AS t (account_id, hour, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, hour, provider_kind, event_type, bounce_class, 0, n
    FROM fresh
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (account_id, hour, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = EXCLUDED.n WHERE t.n <> EXCLUDED.n
    RETURNING 1
), deleted AS (
    DELETE FROM message_event_account_hourly t
    WHERE t.account_id = @account_id::uuid AND t.hour >= @from_hour::timestamptz AND t.hour < @until_hour::timestamptz
      AND (t.slot <> 0 OR NOT EXISTS (
        SELECT 1 FROM fresh f
        WHERE f.hour = t.hour AND f.provider_kind = t.provider_kind AND f.event_type = t.event_type
          AND f.bounce_class IS NOT DISTINCT FROM t.bounce_class))
    RETURNING 1
)
SELECT (SELECT count(*) FROM fresh f WHERE NOT EXISTS (
            SELECT 1 FROM cur c
            WHERE c.hour = f.hour AND c.provider_kind = f.provider_kind AND c.event_type = f.event_type
              AND c.bounce_class IS NOT DISTINCT FROM f.bounce_class AND c.n = f.n))::bigint AS written,
       (SELECT count(*) FROM cur c WHERE c.n <> 0 AND NOT EXISTS (
            SELECT 1 FROM fresh f
            WHERE f.hour = c.hour AND f.provider_kind = c.provider_kind AND f.event_type = c.event_type
              AND f.bounce_class IS NOT DISTINCT FROM c.bounce_class))::bigint AS deleted;


-- name: MessageRollupNext :one
-- The first instant from a time on at which an account has raw rows or
-- rollup rows, hourly or daily (found false when none; a daily row's
-- instant is its midnight; from_day is the UTC day of from_time, a
-- midnight): a rebuild skips the days without.
WITH r AS (
    SELECT least((SELECT min(occurred_at) FROM message_events
                  WHERE account_id = @account_id::uuid AND occurred_at >= @from_time::timestamptz),
                 (SELECT min(hour) FROM message_event_domain_hourly
                  WHERE account_id = @account_id::uuid AND hour >= @from_time::timestamptz),
                 (SELECT min(hour) FROM message_event_account_hourly
                  WHERE account_id = @account_id::uuid AND hour >= @from_time::timestamptz),
                 (SELECT timezone('UTC', min(day)::timestamp) FROM message_event_domain_daily
                  WHERE account_id = @account_id::uuid AND day >= @from_day::date),
                 (SELECT timezone('UTC', min(day)::timestamp) FROM message_event_account_daily
                  WHERE account_id = @account_id::uuid AND day >= @from_day::date)) AS at
)
SELECT (r.at IS NOT NULL)::boolean AS found, coalesce(r.at, 'epoch')::timestamptz AS at
FROM r;

-- name: MessageRollupAccountsAfter :many
-- Accounts in id order, for rebuilding every account a page at a time.
SELECT id FROM accounts WHERE id > @after::uuid ORDER BY id LIMIT @max::int;

-- name: MessageRollupRebuildDomainDaily :one
-- Recounts an account's domain daily rollup of one UTC day (its hours
-- [from_hour, until_hour)) from its domain hourly rollup (rebuilt first, in
-- the same transaction) into slot 0, the day's rows of the other slots
-- deleted. The row triggers keep the daily rows equal to their hours; this
-- corrects a drift they could not see. Returns the keys corrected, as the
-- hourly rebuild does.
WITH fresh AS MATERIALIZED (
    SELECT account_id, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_domain_hourly
    WHERE account_id = @account_id::uuid AND hour >= @from_hour::timestamptz AND hour < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4, 5, 6, 7
    HAVING sum(n) <> 0
), cur AS MATERIALIZED (
    SELECT domain, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_domain_daily
    WHERE account_id = @account_id::uuid AND day = @day::date
    GROUP BY 1, 2, 3, 4, 5, 6
), written AS (
    INSERT INTO message_event_domain_daily AS t
        (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, @day::date, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, 0, n
    FROM fresh
    ORDER BY 1, 3, 4, 5, 6, 7, 8
    ON CONFLICT (account_id, day, domain, domain_id, provider_id, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = EXCLUDED.n WHERE t.n <> EXCLUDED.n
    RETURNING 1
), deleted AS (
    DELETE FROM message_event_domain_daily t
    WHERE t.account_id = @account_id::uuid AND t.day = @day::date
      AND (t.slot <> 0 OR NOT EXISTS (
        SELECT 1 FROM fresh f
        WHERE f.domain = t.domain AND f.provider_id = t.provider_id
          AND f.provider_kind = t.provider_kind AND f.event_type = t.event_type
          AND f.domain_id IS NOT DISTINCT FROM t.domain_id AND f.bounce_class IS NOT DISTINCT FROM t.bounce_class))
    RETURNING 1
)
SELECT (SELECT count(*) FROM fresh f WHERE NOT EXISTS (
            SELECT 1 FROM cur c
            WHERE c.domain = f.domain AND c.provider_id = f.provider_id
              AND c.provider_kind = f.provider_kind AND c.event_type = f.event_type
              AND c.domain_id IS NOT DISTINCT FROM f.domain_id AND c.bounce_class IS NOT DISTINCT FROM f.bounce_class
              AND c.n = f.n))::bigint AS written,
       (SELECT count(*) FROM cur c WHERE c.n <> 0 AND NOT EXISTS (
            SELECT 1 FROM fresh f
            WHERE f.domain = c.domain AND f.provider_id = c.provider_id
              AND f.provider_kind = c.provider_kind AND f.event_type = c.event_type
              AND f.domain_id IS NOT DISTINCT FROM c.domain_id AND f.bounce_class IS NOT DISTINCT FROM c.bounce_class)
       )::bigint AS deleted;


-- name: MessageRollupRebuildAccountDaily :one
-- The same for the account daily rollup, from the account hourly rollup.
WITH fresh AS MATERIALIZED (
    SELECT account_id, provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_account_hourly
    WHERE account_id = @account_id::uuid AND hour >= @from_hour::timestamptz AND hour < @until_hour::timestamptz
    GROUP BY 1, 2, 3, 4
    HAVING sum(n) <> 0
), cur AS MATERIALIZED (
    SELECT provider_kind, event_type, bounce_class, sum(n)::bigint AS n
    FROM message_event_account_daily
    WHERE account_id = @account_id::uuid AND day = @day::date
    GROUP BY 1, 2, 3
), written AS (
    INSERT INTO message_event_account_daily AS t (account_id, day, provider_kind, event_type, bounce_class, slot, n)
    SELECT account_id, @day::date, provider_kind, event_type, bounce_class, 0, n
    FROM fresh
    ORDER BY 1, 3, 4, 5
    ON CONFLICT (account_id, day, provider_kind, event_type, bounce_class, slot)
        DO UPDATE SET n = EXCLUDED.n WHERE t.n <> EXCLUDED.n
    RETURNING 1
), deleted AS (
    DELETE FROM message_event_account_daily t
    WHERE t.account_id = @account_id::uuid AND t.day = @day::date
      AND (t.slot <> 0 OR NOT EXISTS (
        SELECT 1 FROM fresh f
        WHERE f.provider_kind = t.provider_kind AND f.event_type = t.event_type
          AND f.bounce_class IS NOT DISTINCT FROM t.bounce_class))
    RETURNING 1
)
SELECT (SELECT count(*) FROM fresh f WHERE NOT EXISTS (
            SELECT 1 FROM cur c
            WHERE c.provider_kind = f.provider_kind AND c.event_type = f.event_type
              AND c.bounce_class IS NOT DISTINCT FROM f.bounce_class AND c.n = f.n))::bigint AS written,
       (SELECT count(*) FROM cur c WHERE c.n <> 0 AND NOT EXISTS (
            SELECT 1 FROM fresh f
            WHERE f.provider_kind = c.provider_kind AND f.event_type = c.event_type
              AND f.bounce_class IS NOT DISTINCT FROM c.bounce_class))::bigint AS deleted;
