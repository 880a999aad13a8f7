-- Accounts, their API keys and the per-day API usage counters.

CREATE TABLE accounts (
    id            uuid        PRIMARY KEY,
    email         text        NOT NULL,
    password_hash text        NOT NULL,
    is_admin      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_email_key UNIQUE (email),
    CONSTRAINT accounts_email_lower CHECK (email = lower(email))
);

-- A key is stored as its SHA-256 only. Revoked keys keep their row (usage
-- history refers to them) but never authenticate again.
CREATE TABLE api_keys (
    id             uuid        PRIMARY KEY,
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    label          text        NOT NULL,
    key_identifier text        NOT NULL,
    key_hash       bytea       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz,
    revoked_at     timestamptz,
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash),
    CONSTRAINT api_keys_label_length CHECK (char_length(label) BETWEEN 1 AND 100)
);

CREATE UNIQUE INDEX api_keys_account_label_active_key ON api_keys (account_id, label) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_account_id_idx ON api_keys (account_id, created_at);

-- API requests per UTC day and key, flushed in batches from memory by each
-- API process (never one write per request).
CREATE TABLE api_usage_daily (
    account_id uuid   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    api_key_id uuid   NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    day        date   NOT NULL,
    requests   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day, api_key_id)
);
