-- Signing-secret rotation with an overlap, and per-subscription throughput
-- bounds (internal/subscriptions).
--
-- A rotation seals a new secret into secret_ciphertext and keeps the one it
-- replaces, sealed as it was, until previous_secret_expires_at: until then
-- every push carries a signature under each secret, so a receiver can move
-- to the new one at its own pace. The retire job (subscription_secret_retire)
-- clears it at that instant; signing never uses it past that instant anyway.
ALTER TABLE event_subscriptions
    ADD COLUMN previous_secret_ciphertext bytea,
    ADD COLUMN previous_secret_key_id     text,
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD COLUMN secret_rotated_at          timestamptz,
    -- Optional bounds the account sets per endpoint: pushes started per
    -- second and pushes in flight at once, across the whole worker fleet.
    ADD COLUMN max_per_second             integer,
    ADD COLUMN max_in_flight              integer,
    ADD CONSTRAINT event_subscriptions_previous_secret_whole CHECK (
        (previous_secret_ciphertext IS NULL) = (previous_secret_key_id IS NULL)
        AND (previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL)),
    ADD CONSTRAINT event_subscriptions_max_per_second_range CHECK (max_per_second BETWEEN 1 AND 1000),
    ADD CONSTRAINT event_subscriptions_max_in_flight_range CHECK (max_in_flight BETWEEN 1 AND 100);

-- The rate bound of a subscription with max_per_second, as a generic cell
-- rate (GCRA): tat is the theoretical arrival time of the next push. One row
-- per bounded subscription, locked for the instant a push is admitted, so
-- that every worker process shares the bound.
CREATE TABLE subscription_rate_cells (
    subscription_id uuid        PRIMARY KEY REFERENCES event_subscriptions (id) ON DELETE CASCADE,
    tat             timestamptz NOT NULL
);

-- The pushes in flight of a subscription with max_in_flight: slots 0 to
-- max_in_flight - 1, each leased to one push before its request and freed
-- after it. A worker that dies mid-push leaves a lease that expires on its
-- own (the push timeout and a margin), so a slot is never lost; two workers
-- racing for one slot conflict on the key, and the loser waits.
CREATE TABLE subscription_push_leases (
    subscription_id uuid        NOT NULL REFERENCES event_subscriptions (id) ON DELETE CASCADE,
    slot            integer     NOT NULL CHECK (slot >= 0),
    delivery_id     uuid        NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (subscription_id, slot)
);

-- The data API shows the bounds and the rotation's state (never a secret).
GRANT SELECT (max_per_second, max_in_flight, secret_rotated_at, previous_secret_expires_at)
    ON event_subscriptions TO authenticated;
CREATE OR REPLACE VIEW data_api.event_subscriptions WITH (security_invoker = true) AS
    SELECT id, account_id, url, event_types, domain_filter, tag_filter, enabled, disabled_reason,
           disabled_at, failing_since, last_success_at, created_at, updated_at,
           max_per_second, max_in_flight, secret_rotated_at, previous_secret_expires_at
    FROM public.event_subscriptions;
