-- Notification channels (internal/channels): Slack, Microsoft Teams and
-- PagerDuty destinations for events, beside email and webhook
-- subscriptions. The emitting transaction selects the matching channels
-- (query ChannelEmitTargets) and inserts one River job (kind channel_send)
-- per channel; the job carries the channel and event ids only.

CREATE TABLE notification_channels (
    id                  uuid        PRIMARY KEY, -- UUIDv7
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind                text        NOT NULL CHECK (kind IN ('slack', 'teams', 'pagerduty')),
    label               text        NOT NULL DEFAULT '' CHECK (char_length(label) <= 100),
    -- The destination ({"url", "routing_key"} as JSON) sealed with
    -- AES-256-GCM by internal/secretbox, bound to the row id;
    -- secret_key_id names the key. destination is the redacted form the
    -- API shows (host and "…", or the routing key's last 4 characters).
    secret_ciphertext   bytea       NOT NULL,
    secret_key_id       text        NOT NULL,
    destination         text        NOT NULL,
    -- Preference group names; NULL means every group. Events of required
    -- groups (audit, security) ignore it.
    groups              text[],
    min_severity        text        NOT NULL DEFAULT 'critical' CHECK (min_severity IN ('info', 'warning', 'critical')),
    domain_filter       text,
    tag_filter          text,
    last_success_at     timestamptz,
    -- First failed send since the last success; NULL while healthy.
    failing_since       timestamptz,
    last_error          text,
    -- When notification_channel_failing was raised for the current
    -- failing period (once per period); cleared by the next success.
    failing_notified_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX notification_channels_account_idx ON notification_channels (account_id, id);

-- The alerts a PagerDuty channel was sent a trigger for: only those
-- channels get the resolve (alert acknowledged) and the re-trigger
-- (acknowledgement withdrawn). Written by the emitting transaction of the
-- alert; no foreign key to events, which is partitioned and pruned.
CREATE TABLE notification_channel_alerts (
    channel_id uuid        NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    alert_id   uuid        NOT NULL,
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel_id, alert_id)
);

CREATE INDEX notification_channel_alerts_alert_idx ON notification_channel_alerts (alert_id);
