-- Sending providers (ESPs), the payloads their webhooks deliver, the
-- normalised per-recipient message events, the suppression list and the
-- bounce/complaint spike state.
--
-- Ingress stores a verified payload and enqueues its normalisation job
-- (kind provider_payload) in one transaction; the job writes
-- message_events and suppressions. A periodic job enqueues a spike check
-- (kind message_spike_check) for every domain that got events.

CREATE TABLE sending_providers (
    id                uuid        PRIMARY KEY, -- UUIDv7; in the ingress URL
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind              text        NOT NULL,
    label             text        NOT NULL,
    -- The non-secret part of the configuration shown back (SNS topic ARNs,
    -- Postmark's allowed IPs and basic-auth user name).
    config            jsonb       NOT NULL DEFAULT '{}',
    -- The verification material (a providers.Secret as JSON) sealed with
    -- internal/secretbox, bound to the row id; never shown again.
    secret_ciphertext bytea       NOT NULL,
    secret_key_id     text        NOT NULL,
    last_payload_at   timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sending_providers_kind CHECK (kind IN ('ses', 'sendgrid', 'postmark', 'mailgun', 'resend')),
    CONSTRAINT sending_providers_label_length CHECK (char_length(label) BETWEEN 1 AND 100),
    CONSTRAINT sending_providers_account_label_key UNIQUE (account_id, label)
);

-- Sending domains (registered domains of the account) bound to a provider.
CREATE TABLE sending_provider_links (
    provider_id uuid        NOT NULL REFERENCES sending_providers (id) ON DELETE CASCADE,
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_id, domain_id)
);

CREATE INDEX sending_provider_links_domain_idx ON sending_provider_links (domain_id);

-- Verified webhook bodies, kept until normalised and then for a while for
-- re-runs. replay_key is what makes a request unique for its scheme (the
-- Svix id, Mailgun's token, the SNS MessageId, SendGrid's signature, the
-- body hash): a repeat with the same body is acknowledged and ignored; a
-- reused Mailgun token with another body is refused.
CREATE TABLE provider_payloads (
    id           uuid        PRIMARY KEY, -- UUIDv7
    provider_id  uuid        NOT NULL REFERENCES sending_providers (id) ON DELETE CASCADE,
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    replay_key   text        NOT NULL,
    body_sha256  bytea       NOT NULL,
    body         bytea       NOT NULL,
    -- The provider's event id when it is carried by a header (svix-id).
    header_event_id text,
    received_at  timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz,
    events       integer,
    error        text,
    CONSTRAINT provider_payloads_replay_key UNIQUE (provider_id, replay_key)
);

CREATE INDEX provider_payloads_received_idx ON provider_payloads (received_at);

-- One row per provider event per recipient.
CREATE TABLE message_events (
    id             uuid        PRIMARY KEY, -- UUIDv7
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_id    uuid        NOT NULL REFERENCES sending_providers (id) ON DELETE CASCADE,
    provider_kind  text        NOT NULL,
    payload_id     uuid        REFERENCES provider_payloads (id) ON DELETE SET NULL,
    -- The provider's event id, made unique per recipient: the dedupe key.
    event_id       text        NOT NULL,
    message_id     text        NOT NULL DEFAULT '',
    event_type     text        NOT NULL,
    bounce_class   text,
    recipient      text        NOT NULL,
    -- sha256 of the lower-cased recipient, for lookups.
    recipient_hash bytea       NOT NULL,
    -- The sending domain: a linked domain of the provider, or what the
    -- payload named (unlinked = true, not counted in rates).
    domain         text        NOT NULL DEFAULT '',
    domain_id      uuid        REFERENCES domains (id) ON DELETE SET NULL,
    unlinked       boolean     NOT NULL DEFAULT false,
    classification text        NOT NULL DEFAULT '',
    detail         text,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT message_events_type CHECK (event_type IN ('sent', 'delivered', 'deferred', 'bounced', 'complained', 'unsubscribed', 'suppressed')),
    CONSTRAINT message_events_bounce_class CHECK (bounce_class IN ('hard', 'soft')),
    CONSTRAINT message_events_provider_event_key UNIQUE (provider_id, event_id)
);

-- Rates per (domain, provider) over a rolling window.
CREATE INDEX message_events_domain_idx ON message_events (domain_id, provider_id, occurred_at) WHERE domain_id IS NOT NULL;
-- Aggregates per account and day.
CREATE INDEX message_events_account_idx ON message_events (account_id, occurred_at);
CREATE INDEX message_events_recipient_idx ON message_events (account_id, recipient_hash);
-- The spike scheduler finds the domains that got events recently.
CREATE INDEX message_events_received_idx ON message_events (received_at) WHERE domain_id IS NOT NULL;

CREATE TABLE suppressions (
    id              uuid        PRIMARY KEY, -- UUIDv7
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    email           text        NOT NULL,
    -- sha256 of the lower-cased address: the check is one index probe.
    email_hash      bytea       NOT NULL,
    reason          text        NOT NULL,
    domain          text,
    provider_id     uuid        REFERENCES sending_providers (id) ON DELETE SET NULL,
    source_event_id uuid        REFERENCES message_events (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT suppressions_reason CHECK (reason IN ('hard_bounce', 'complaint', 'manual')),
    CONSTRAINT suppressions_email_length CHECK (char_length(email) BETWEEN 3 AND 320),
    CONSTRAINT suppressions_account_email_key UNIQUE (account_id, email_hash)
);

-- The open spike episode of a (domain, provider, kind); one row per
-- episode start, closed when the rate falls back (hysteresis).
CREATE TABLE message_spikes (
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    provider_id uuid        NOT NULL REFERENCES sending_providers (id) ON DELETE CASCADE,
    kind        text        NOT NULL,
    active      boolean     NOT NULL DEFAULT false,
    started_at  timestamptz,
    ended_at    timestamptz,
    event_id    uuid,
    rate        double precision NOT NULL DEFAULT 0,
    checked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (domain_id, provider_id, kind),
    CONSTRAINT message_spikes_kind CHECK (kind IN ('bounce', 'complaint'))
);
