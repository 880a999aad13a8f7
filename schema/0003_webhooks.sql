-- Event subscriptions and their webhook deliveries.
--
-- One delivery row and one River job (kind webhook_delivery, queue webhooks)
-- per (event, subscription), both written in the transaction that emits the
-- event. The job carries the delivery id only; the worker reads this row and
-- the subscription when it runs, so the row converges whoever runs the job.

CREATE TABLE event_subscriptions (
    id                uuid        PRIMARY KEY, -- UUIDv7
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    url               text        NOT NULL,
    -- NULL means every event type.
    event_types       text[],
    domain_filter     text,
    tag_filter        text,
    -- The signing secret (whsec_...) sealed with AES-256-GCM by
    -- internal/secretbox, bound to the row id; secret_key_id names the key.
    secret_ciphertext bytea       NOT NULL,
    secret_key_id     text        NOT NULL,
    enabled           boolean     NOT NULL DEFAULT true,
    disabled_reason   text,
    disabled_at       timestamptz,
    -- First failed attempt since the last success; NULL while healthy. A
    -- subscription failing for 5 days is disabled.
    failing_since     timestamptz,
    -- Last successful push, updated at most once a minute.
    last_success_at   timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT event_subscriptions_url_length CHECK (char_length(url) BETWEEN 1 AND 2048)
);

CREATE INDEX event_subscriptions_account_idx ON event_subscriptions (account_id, id);
-- Fan-out reads the enabled subscriptions of one account in every emitting
-- transaction.
CREATE INDEX event_subscriptions_account_enabled_idx ON event_subscriptions (account_id) WHERE enabled;

CREATE TABLE webhook_deliveries (
    id               uuid        PRIMARY KEY, -- UUIDv7; also the webhook-id header
    account_id       uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    subscription_id  uuid        NOT NULL REFERENCES event_subscriptions (id) ON DELETE CASCADE,
    event_id         uuid        NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    event_type       text        NOT NULL,
    -- The exact bytes pushed on every attempt (webhook.Payload).
    body             bytea       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 10,
    last_status_code integer,
    last_error_class text,
    last_error       text,
    next_retry_at    timestamptz,
    -- The River job that owns the delivery now.
    job_id           bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    failed_at        timestamptz,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'retrying', 'delivered', 'failed'))
);

CREATE INDEX webhook_deliveries_account_idx ON webhook_deliveries (account_id, id);
CREATE INDEX webhook_deliveries_account_status_idx ON webhook_deliveries (account_id, status, id);
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);
-- The reconciler scans the rows that are still in flight.
CREATE INDEX webhook_deliveries_open_idx ON webhook_deliveries (updated_at) WHERE status IN ('pending', 'retrying');

-- One row per push attempt, written before the request is sent (started_at)
-- and completed after it; a row never completed was interrupted (crash).
CREATE TABLE webhook_delivery_attempts (
    id                 uuid        PRIMARY KEY,
    delivery_id        uuid        NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    job_id             bigint,
    job_attempt        integer,
    started_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    status_code        integer,
    error_class        text,
    error              text,
    duration_ms        integer,
    response_body      text,
    response_truncated boolean     NOT NULL DEFAULT false,
    -- false for a push that did not use an attempt (429/503 with
    -- Retry-After, worker shutdown).
    counted            boolean     NOT NULL DEFAULT true
);

CREATE INDEX webhook_delivery_attempts_delivery_idx ON webhook_delivery_attempts (delivery_id, started_at);
