-- Blocklist monitoring (internal/reputation): which addresses and names of
-- a domain are watched, the shared cache of DNSBL answers, and each
-- domain's listing state, which drives the blocklist_listed and
-- blocklist_delisted events.

-- The answers of the lists, shared by every account: a (zone, target) pair
-- is public data and is looked up at most once until expires_at, whatever
-- the number of domains watching it. Only answers that say something are
-- stored (listed or not listed); list errors and timeouts change nothing.
CREATE TABLE blocklist_lookups (
    zone       text        NOT NULL,
    target     text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('listed', 'not_listed')),
    -- [{"code": "127.0.0.2", "name": "SBL", "meaning": "...", "informational": false}]
    codes      jsonb       NOT NULL DEFAULT '[]',
    reason     text        NOT NULL DEFAULT '',
    checked_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (zone, target)
);

-- Per domain, what is watched: the IPs of its reports (origin 'report'),
-- ranges the user pins ('pinned'), and the domain itself for domain lists
-- ('domain'). share is the part of the domain's last 7 days of mail the
-- target carried (0 to 1). account_id leads every key so that the table
-- can be distributed by account.
CREATE TABLE reputation_targets (
    account_id uuid             NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id  uuid             NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    target     text             NOT NULL,
    kind       text             NOT NULL CHECK (kind IN ('ip', 'domain')),
    origin     text             NOT NULL CHECK (origin IN ('report', 'pinned', 'domain')),
    messages   bigint           NOT NULL DEFAULT 0,
    share      double precision NOT NULL DEFAULT 0,
    checked_at timestamptz,
    updated_at timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, domain_id, target)
);

-- Per domain, list and target: the listing state. A row with delisted_at
-- NULL is a current listing; a listing again later reuses the row.
CREATE TABLE reputation_listings (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    zone        text        NOT NULL,
    target      text        NOT NULL,
    codes       jsonb       NOT NULL DEFAULT '[]',
    reason      text        NOT NULL DEFAULT '',
    listed_at   timestamptz NOT NULL,
    delisted_at timestamptz,
    PRIMARY KEY (account_id, domain_id, zone, target)
);

-- The data API (same pattern as 0012_data_api_tables.sql): reads of one's
-- own watched targets and listings under RLS, column grants, and
-- security_invoker views. The shared lookup cache is not exposed.
ALTER TABLE reputation_targets ENABLE ROW LEVEL SECURITY;
CREATE POLICY reputation_targets_tenant_read ON reputation_targets FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, domain_id, target, kind, origin, messages, share, checked_at, updated_at)
    ON reputation_targets TO authenticated;

ALTER TABLE reputation_listings ENABLE ROW LEVEL SECURITY;
CREATE POLICY reputation_listings_tenant_read ON reputation_listings FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, domain_id, zone, target, codes, reason, listed_at, delisted_at)
    ON reputation_listings TO authenticated;

CREATE VIEW data_api.reputation_targets WITH (security_invoker = true) AS
    SELECT account_id, domain_id, target, kind, origin, messages, share, checked_at, updated_at
    FROM public.reputation_targets;
GRANT SELECT ON data_api.reputation_targets TO authenticated;

CREATE VIEW data_api.reputation_listings WITH (security_invoker = true) AS
    SELECT account_id, domain_id, zone, target, codes, reason, listed_at, delisted_at
    FROM public.reputation_listings;
GRANT SELECT ON data_api.reputation_listings TO authenticated;
