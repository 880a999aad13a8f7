-- Identity and the row-level-secured data API.
--
-- mailwatch signs short-lived ES256 JWTs with keys kept here (sealed with
-- internal/secretbox), trusts external identity providers once an account
-- links their users, and serves tenant reads at /rest/v1/<table> from the
-- views of schema data_api. The tenant boundary is in Postgres: every
-- data-API query runs as role "authenticated" with the JWT's claims in
-- request.jwt.claims (the GUC names PostgREST uses), and row-level security
-- policies compare each row's account with the claims' "sub". PostgREST
-- pointed at this database (deploy/postgrest.conf) serves the same views
-- under the same policies.

-- Signing keys: one "next" (published in the JWKS before it signs, so every
-- verifier knows it in advance), one "current" (signs), and "retired" keys
-- that still verify the tokens they signed until those expire.
CREATE TABLE signing_keys (
    id                 uuid        PRIMARY KEY, -- UUIDv7
    kid                text        NOT NULL,
    state              text        NOT NULL,
    -- The PKCS#8 private key sealed by internal/secretbox, bound to kid.
    private_ciphertext bytea       NOT NULL,
    secret_key_id      text        NOT NULL,
    -- The public JWK as published at /.well-known/jwks.json.
    public_jwk         jsonb       NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    activated_at       timestamptz,
    retired_at         timestamptz,
    CONSTRAINT signing_keys_kid_key UNIQUE (kid),
    CONSTRAINT signing_keys_state_check CHECK (state IN ('next', 'current', 'retired')),
    CONSTRAINT signing_keys_retired_at CHECK ((state = 'retired') = (retired_at IS NOT NULL))
);

CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys (state) WHERE state = 'current';
CREATE UNIQUE INDEX signing_keys_one_next ON signing_keys (state) WHERE state = 'next';

-- External identity providers an account trusts, and the external users
-- (by subject or email) bound to the account.
CREATE TABLE auth_providers (
    id                        uuid        PRIMARY KEY, -- UUIDv7
    account_id                uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind                      text        NOT NULL,
    name                      text        NOT NULL DEFAULT '',
    issuer                    text        NOT NULL,
    jwks_url                  text        NOT NULL,
    -- NULL accepts any audience (some providers' session tokens carry none).
    audience                  text,
    subject_claim             text        NOT NULL DEFAULT 'sub',
    email_claim               text        NOT NULL DEFAULT 'email',
    -- The ingress webhook secret sealed by internal/secretbox, bound to id.
    webhook_secret_ciphertext bytea,
    webhook_secret_key_id     text,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT auth_providers_kind_check CHECK (kind IN ('supabase', 'clerk', 'auth0', 'workos', 'oidc')),
    CONSTRAINT auth_providers_account_issuer_key UNIQUE (account_id, issuer),
    CONSTRAINT auth_providers_name_length CHECK (char_length(name) <= 100),
    CONSTRAINT auth_providers_issuer_length CHECK (char_length(issuer) BETWEEN 1 AND 2048),
    CONSTRAINT auth_providers_jwks_url_length CHECK (char_length(jwks_url) BETWEEN 1 AND 2048)
);

-- Token verification finds the providers of an issuer.
CREATE INDEX auth_providers_issuer_idx ON auth_providers (issuer);

CREATE TABLE auth_provider_links (
    id          uuid        PRIMARY KEY, -- UUIDv7
    provider_id uuid        NOT NULL REFERENCES auth_providers (id) ON DELETE CASCADE,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    subject     text,
    -- Lower case.
    email       text,
    -- 'api' (POST .../links) or 'webhook' (the provider's user events).
    source      text        NOT NULL DEFAULT 'api',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT auth_provider_links_identity CHECK (subject IS NOT NULL OR email IS NOT NULL),
    CONSTRAINT auth_provider_links_source_check CHECK (source IN ('api', 'webhook')),
    CONSTRAINT auth_provider_links_email_lower CHECK (email = lower(email))
);

CREATE UNIQUE INDEX auth_provider_links_subject_key ON auth_provider_links (provider_id, subject) WHERE subject IS NOT NULL;
CREATE UNIQUE INDEX auth_provider_links_email_key ON auth_provider_links (provider_id, email) WHERE email IS NOT NULL;
CREATE INDEX auth_provider_links_account_idx ON auth_provider_links (account_id, id);

-- Ingress deduplication on the provider's own stable event id.
CREATE TABLE auth_provider_webhook_events (
    provider_id uuid        NOT NULL REFERENCES auth_providers (id) ON DELETE CASCADE,
    event_id    text        NOT NULL,
    event_type  text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_id, event_id)
);

CREATE INDEX auth_provider_webhook_events_received_idx ON auth_provider_webhook_events (received_at);

-- Roles. Roles belong to the whole cluster, so several databases (or a
-- Supabase project, which has both already) may have made them first.
DO $$
BEGIN
    CREATE ROLE authenticated NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

DO $$
BEGIN
    CREATE ROLE anon NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

-- The role that runs migrations is the role the API connects as: it must be
-- able to SET ROLE authenticated (PostgREST's authenticator needs the same).
DO $$
BEGIN
    EXECUTE format('GRANT authenticated, anon TO %I', current_user);
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

-- The account a request's claims name, or NULL when "sub" is not an
-- account id (no row matches NULL).
CREATE FUNCTION mailwatch_jwt_account_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN c ->> 'sub' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
        THEN (c ->> 'sub')::uuid
    END
    FROM (SELECT nullif(current_setting('request.jwt.claims', true), '')::json AS c) AS claims
$$;

-- Policies: reads of one's own rows only. No role but the owner has
-- INSERT, UPDATE or DELETE, so writes through the data API are refused.
-- (Not FORCE ROW LEVEL SECURITY: the owner is the application's own role,
-- which serves every account's REST requests and workers and would need a
-- policy admitting all rows, the same as no FORCE.)
ALTER TABLE domains ENABLE ROW LEVEL SECURITY;
CREATE POLICY domains_tenant_read ON domains FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE domain_health_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY domain_health_history_tenant_read ON domain_health_history FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
CREATE POLICY events_tenant_read ON events FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE receivers ENABLE ROW LEVEL SECURITY;
CREATE POLICY receivers_tenant_read ON receivers FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE receiver_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY receiver_messages_tenant_read ON receiver_messages FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE event_subscriptions ENABLE ROW LEVEL SECURITY;
CREATE POLICY event_subscriptions_tenant_read ON event_subscriptions FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhook_deliveries_tenant_read ON webhook_deliveries FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE auth_providers ENABLE ROW LEVEL SECURITY;
CREATE POLICY auth_providers_tenant_read ON auth_providers FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE auth_provider_links ENABLE ROW LEVEL SECURITY;
CREATE POLICY auth_provider_links_tenant_read ON auth_provider_links FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

-- Column grants: the public fields only. Secrets, hashes, ciphertexts and
-- raw bodies are not selectable by "authenticated" even on the tables.
GRANT SELECT (id, account_id, name, tags, dkim_selectors, created_at, updated_at, checked_at, results,
              check_status, score, health, scored_at) ON domains TO authenticated;
GRANT SELECT (id, domain_id, score, report, computed_at) ON domain_health_history TO authenticated;
GRANT SELECT (id, account_id, event_type, severity, domain, tags, payload, created_at, acknowledged_at,
              acknowledged_by, acknowledged_note) ON events TO authenticated;
GRANT SELECT (id, account_id, channel, label, address, ttl_seconds, expires_at, created_at, expired_at)
    ON receivers TO authenticated;
GRANT SELECT (id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body, parsed,
              size_bytes, received_at) ON receiver_messages TO authenticated;
GRANT SELECT (id, account_id, url, event_types, domain_filter, tag_filter, enabled, disabled_reason,
              disabled_at, failing_since, last_success_at, created_at, updated_at)
    ON event_subscriptions TO authenticated;
GRANT SELECT (id, account_id, subscription_id, event_id, event_type, status, attempts, max_attempts,
              last_status_code, last_error, next_retry_at, created_at, updated_at, delivered_at, failed_at)
    ON webhook_deliveries TO authenticated;
GRANT SELECT (id, account_id, kind, name, issuer, jwks_url, audience, subject_claim, email_claim,
              created_at, updated_at) ON auth_providers TO authenticated;
GRANT SELECT (id, provider_id, account_id, subject, email, source, created_at, updated_at)
    ON auth_provider_links TO authenticated;

-- The data API's tables: security_invoker views (a plain view would run
-- as its owner and bypass the policies), named as the API names them.
-- IF NOT EXISTS: the schema outlives a DROP SCHEMA public CASCADE (its views do not).
CREATE SCHEMA IF NOT EXISTS data_api;
GRANT USAGE ON SCHEMA data_api TO authenticated, anon;

CREATE VIEW data_api.domains WITH (security_invoker = true) AS
    SELECT id, account_id, name, tags, dkim_selectors, created_at, updated_at, checked_at, results,
           check_status, score, health, scored_at
    FROM public.domains;

CREATE VIEW data_api.domain_health_history WITH (security_invoker = true) AS
    SELECT id, domain_id, score, report, computed_at FROM public.domain_health_history;

CREATE VIEW data_api.events WITH (security_invoker = true) AS
    SELECT id, account_id, event_type, severity, domain, tags, payload, created_at, acknowledged_at,
           acknowledged_by, acknowledged_note
    FROM public.events;

CREATE VIEW data_api.receivers WITH (security_invoker = true) AS
    SELECT id, account_id, channel, label, address, ttl_seconds, expires_at, created_at, expired_at
    FROM public.receivers;

CREATE VIEW data_api.messages WITH (security_invoker = true) AS
    SELECT id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body, parsed,
           size_bytes, received_at
    FROM public.receiver_messages;

CREATE VIEW data_api.event_subscriptions WITH (security_invoker = true) AS
    SELECT id, account_id, url, event_types, domain_filter, tag_filter, enabled, disabled_reason,
           disabled_at, failing_since, last_success_at, created_at, updated_at
    FROM public.event_subscriptions;

CREATE VIEW data_api.deliveries WITH (security_invoker = true) AS
    SELECT id, account_id, subscription_id, event_id, event_type, status, attempts, max_attempts,
           last_status_code, last_error, next_retry_at, created_at, updated_at, delivered_at, failed_at
    FROM public.webhook_deliveries;

CREATE VIEW data_api.auth_providers WITH (security_invoker = true) AS
    SELECT id, account_id, kind, name, issuer, jwks_url, audience, subject_claim, email_claim,
           created_at, updated_at
    FROM public.auth_providers;

CREATE VIEW data_api.auth_provider_links WITH (security_invoker = true) AS
    SELECT id, provider_id, account_id, subject, email, source, created_at, updated_at
    FROM public.auth_provider_links;

GRANT SELECT ON ALL TABLES IN SCHEMA data_api TO authenticated;
