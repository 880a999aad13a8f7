-- name: PreferenceEmitInputs :one
-- Everything one emitted event's delivery decision needs, in one query
-- (internal/events fanOut): the account's channel mutes, the type's
-- override, the group's switches, whether the account has a verified
-- notification address, whether it has notification channels (then
-- ChannelEmitTargets chooses them), and the matching enabled subscriptions
-- (type in event_types or event_types NULL, domain equals domain_filter,
-- one of the tags equals tag_filter, when those are set).
SELECT
    coalesce(s.mute_email, false)::boolean   AS mute_email,
    coalesce(s.mute_webhook, false)::boolean AS mute_webhook,
    o.email   AS override_email,
    o.webhook AS override_webhook,
    g.email   AS group_email,
    g.webhook AS group_webhook,
    EXISTS (SELECT 1 FROM notification_addresses a
            WHERE a.account_id = me.account_id AND a.verified_at IS NOT NULL)::boolean AS has_verified_address,
    EXISTS (SELECT 1 FROM notification_channels c WHERE c.account_id = me.account_id)::boolean AS has_channels,
    ARRAY(SELECT es.id FROM event_subscriptions es
          WHERE es.account_id = me.account_id
            AND es.enabled
            AND (es.event_types IS NULL OR @event_type::text = ANY (es.event_types))
            AND (es.domain_filter IS NULL OR es.domain_filter = sqlc.narg('domain')::text)
            AND (es.tag_filter IS NULL OR es.tag_filter = ANY (@tags::text[]))
          ORDER BY es.id)::uuid[] AS subscription_ids
FROM (SELECT @account_id::uuid AS account_id) me
LEFT JOIN notification_settings s ON s.account_id = me.account_id
LEFT JOIN preference_overrides o ON o.account_id = me.account_id AND o.event_type = @event_type::text
LEFT JOIN preference_groups g ON g.account_id = me.account_id AND g.group_name = @group_name::text;

-- name: NotificationSettingsGet :one
SELECT * FROM notification_settings WHERE account_id = @account_id::uuid;

-- name: NotificationSettingsUpsert :one
INSERT INTO notification_settings (account_id, mute_email, mute_webhook)
VALUES (@account_id::uuid, @mute_email::boolean, @mute_webhook::boolean)
ON CONFLICT (account_id) DO UPDATE
SET mute_email = excluded.mute_email, mute_webhook = excluded.mute_webhook, updated_at = now()
RETURNING *;

-- name: PreferenceGroupList :many
SELECT * FROM preference_groups WHERE account_id = @account_id::uuid ORDER BY group_name;

-- name: PreferenceGroupUpsert :one
INSERT INTO preference_groups (account_id, group_name, email, webhook)
VALUES (@account_id::uuid, @group_name::text, @email::boolean, @webhook::boolean)
ON CONFLICT (account_id, group_name) DO UPDATE
SET email = excluded.email, webhook = excluded.webhook, updated_at = now()
RETURNING *;

-- name: PreferenceOverrideList :many
SELECT * FROM preference_overrides WHERE account_id = @account_id::uuid ORDER BY event_type;

-- name: PreferenceOverrideUpsert :one
INSERT INTO preference_overrides (account_id, event_type, email, webhook)
VALUES (@account_id::uuid, @event_type::text, sqlc.narg('email')::boolean, sqlc.narg('webhook')::boolean)
ON CONFLICT (account_id, event_type) DO UPDATE
SET email = excluded.email, webhook = excluded.webhook, updated_at = now()
RETURNING *;

-- name: PreferenceOverrideDelete :execrows
DELETE FROM preference_overrides WHERE account_id = @account_id::uuid AND event_type = @event_type::text;
