-- name: WeeklySettingsGet :one
SELECT enabled, domains, tags, replace_daily FROM weekly_digest_settings WHERE account_id = @account_id::uuid;

-- name: WeeklySettingsPut :one
INSERT INTO weekly_digest_settings AS s (account_id, enabled, domains, tags, replace_daily)
VALUES (@account_id::uuid, @enabled::boolean, @domains::text[], @tags::text[], @replace_daily::boolean)
ON CONFLICT (account_id) DO UPDATE
SET enabled = EXCLUDED.enabled, domains = EXCLUDED.domains, tags = EXCLUDED.tags, replace_daily = EXCLUDED.replace_daily,
    updated_at = now()
RETURNING enabled, domains, tags, replace_daily;

-- name: WeeklyAccounts :many
-- Accounts with a verified notification address, the weekly digest on
-- (no settings row: on) and the week not mailed yet, in id order after
-- @after.
SELECT DISTINCT a.account_id FROM notification_addresses a
WHERE a.verified_at IS NOT NULL AND a.account_id > @after::uuid
  AND NOT EXISTS (SELECT 1 FROM weekly_digest_settings s WHERE s.account_id = a.account_id AND NOT s.enabled)
  AND NOT EXISTS (SELECT 1 FROM weekly_digests w WHERE w.account_id = a.account_id AND w.week = @week::date)
ORDER BY a.account_id
LIMIT @max_rows::int;

-- name: WeeklySent :one
SELECT EXISTS (SELECT 1 FROM weekly_digests WHERE account_id = @account_id::uuid AND week = @week::date);

-- name: WeeklyRecord :exec
INSERT INTO weekly_digests (account_id, week, domains) VALUES (@account_id::uuid, @week::date, @domains::int)
ON CONFLICT DO NOTHING;

-- name: WeeklyEventsOfType :many
-- The account's events of one type in [since, until), oldest first.
SELECT domain, payload, created_at FROM events
WHERE account_id = @account_id::uuid AND event_type = @event_type::text
  AND created_at >= @since::timestamptz AND created_at < @until::timestamptz
ORDER BY created_at, id
LIMIT @max_rows::int;

-- name: WeeklyOpenAlerts :many
-- Open alerts per domain, of the newest @max_rows open ones.
SELECT coalesce(e.domain, '')::text AS domain, count(*)::bigint AS alerts
FROM (
    SELECT domain FROM events
    WHERE account_id = @account_id::uuid AND severity = 'critical' AND acknowledged_at IS NULL
    ORDER BY created_at DESC, id DESC
    LIMIT @max_rows::int
) e
GROUP BY 1;
