-- Plans and billing (internal/plans, internal/billing).
--
-- An account without a row here is on the free plan with billing status
-- active: accounts that never paid need no row.
CREATE TABLE account_plans (
    account_id             uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    -- The plan whose limits apply now (internal/plans.Names).
    plan                   text        NOT NULL DEFAULT 'free',
    -- active | past_due | canceled. past_due starts a grace period; when
    -- grace_until passes, the grace job moves the plan to free.
    billing_status         text        NOT NULL DEFAULT 'active',
    grace_until            timestamptz,
    stripe_customer_id     text,
    -- The Stripe event time (created) of the newest invoice event applied:
    -- an older invoice event arriving later changes nothing.
    invoice_event_at       timestamptz,
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT account_plans_plan CHECK (plan IN ('free', 'pro', 'business')),
    CONSTRAINT account_plans_billing_status CHECK (billing_status IN ('active', 'past_due', 'canceled')),
    CONSTRAINT account_plans_stripe_customer_key UNIQUE (stripe_customer_id)
);

-- The grace job's scan: past-due accounts whose grace period ended.
CREATE INDEX account_plans_grace ON account_plans (grace_until) WHERE billing_status = 'past_due';

-- One row per Stripe subscription, holding the newest state applied.
-- event_created is the Stripe event time of that state: an event older
-- than it is ignored, whatever order events arrive in.
CREATE TABLE stripe_subscriptions (
    id             text        PRIMARY KEY, -- sub_...
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    customer_id    text        NOT NULL,
    status         text        NOT NULL,
    price_id       text,
    -- The plan the price maps to (STRIPE_PRICE_PLANS); free when unmapped.
    plan           text        NOT NULL,
    event_id       text        NOT NULL,
    event_created  timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX stripe_subscriptions_account ON stripe_subscriptions (account_id);

-- Verified Stripe webhook events, stored by the ingress route in the same
-- transaction as the River job that applies them. The primary key makes a
-- replay a no-op.
CREATE TABLE stripe_events (
    id          text        PRIMARY KEY, -- evt_...
    type        text        NOT NULL,
    created     timestamptz NOT NULL,
    payload     bytea       NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    -- Set by the job: when it applied the event, what it did, and the
    -- account it concerned (NULL when no account matched).
    applied_at  timestamptz,
    outcome     text,
    account_id  uuid        REFERENCES accounts (id) ON DELETE CASCADE
);

CREATE INDEX stripe_events_account ON stripe_events (account_id) WHERE account_id IS NOT NULL;
