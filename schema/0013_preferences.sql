-- Notification preferences and notification addresses (issue 15, items 1
-- and 2). Resolution (internal/events/preferences.go), first match wins: a
-- required type always goes out; an account-wide channel mute blocks; a
-- per-type override decides; the group's switch decides; otherwise on.
-- No row means "not set": an account without any row gets everything.

-- One row per account that has set a mute; absent means nothing muted.
CREATE TABLE notification_settings (
    account_id   uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    mute_email   boolean     NOT NULL DEFAULT false,
    mute_webhook boolean     NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A group's channel switches. group_name is one of the registry's groups
-- (internal/events/groups.go); the API refuses unknown names.
CREATE TABLE preference_groups (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    group_name text        NOT NULL,
    email      boolean     NOT NULL,
    webhook    boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, group_name)
);

-- A per-type override; NULL on a channel means "the group decides".
CREATE TABLE preference_overrides (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    event_type text        NOT NULL,
    email      boolean,
    webhook    boolean,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, event_type)
);

-- Where alerts and digests are mailed. Only verified addresses get mail.
-- The verification token is stored as its SHA-256 only; it is single-use
-- (cleared on verification) and expires.
CREATE TABLE notification_addresses (
    id                uuid        PRIMARY KEY,
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    email             text        NOT NULL,
    -- login: the account's sign-in address, replaced when it changes.
    login             boolean     NOT NULL DEFAULT false,
    token_hash        bytea,
    token_expires_at  timestamptz,
    verification_sent_at timestamptz,
    verified_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notification_addresses_account_email_key UNIQUE (account_id, email),
    CONSTRAINT notification_addresses_email_lower CHECK (email = lower(email))
);
CREATE UNIQUE INDEX notification_addresses_token_hash_key ON notification_addresses (token_hash) WHERE token_hash IS NOT NULL;
CREATE INDEX notification_addresses_verified ON notification_addresses (account_id) WHERE verified_at IS NOT NULL;

-- One row per account and UTC day whose digest was mailed, so a re-run
-- of the day's job does not mail it twice.
CREATE TABLE notification_digests (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day        date        NOT NULL,
    events     integer     NOT NULL,
    sent_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, day)
);

-- The data API (same pattern as 0010 and 0012): the caller's own group and
-- override rows, read-only, through security_invoker views.
ALTER TABLE preference_groups ENABLE ROW LEVEL SECURITY;
CREATE POLICY preference_groups_tenant_read ON preference_groups FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE preference_overrides ENABLE ROW LEVEL SECURITY;
CREATE POLICY preference_overrides_tenant_read ON preference_overrides FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

GRANT SELECT (account_id, group_name, email, webhook, updated_at) ON preference_groups TO authenticated;
GRANT SELECT (account_id, event_type, email, webhook, updated_at) ON preference_overrides TO authenticated;

CREATE VIEW data_api.preference_groups WITH (security_invoker = true) AS
    SELECT account_id, group_name, email, webhook, updated_at FROM public.preference_groups;

CREATE VIEW data_api.preference_overrides WITH (security_invoker = true) AS
    SELECT account_id, event_type, email, webhook, updated_at FROM public.preference_overrides;

GRANT SELECT ON data_api.preference_groups, data_api.preference_overrides TO authenticated;
