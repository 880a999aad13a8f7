-- Monitored domains, their latest DNS snapshot and their health history.

CREATE TABLE domains (
    id             uuid        PRIMARY KEY, -- UUIDv7
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- Normalised: IDNA A-labels, lower case, no trailing dot, not a public
    -- suffix (package domainname).
    name           text        NOT NULL,
    tags           text[]      NOT NULL DEFAULT '{}',
    dkim_selectors text[]      NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- The latest check as it came back (dnscheck.Results), temperrors
    -- included, and when it started. A check that started before the
    -- stored one is discarded, so racing checks cannot go back in time.
    checked_at     timestamptz,
    results        jsonb,
    -- Per check, the status of the latest check (the list's summary).
    check_status   jsonb       NOT NULL DEFAULT '{}',
    -- Per check, the last result that was not a temperror (a
    -- dnscheck.Results with only known checks set): the baseline change
    -- detection compares with and the input of the health score, so a
    -- DNS timeout is never a change and never moves the score.
    known          jsonb,
    -- The latest complete health computation (health.Report).
    score          integer,
    health         jsonb,
    scored_at      timestamptz,
    CONSTRAINT domains_account_name_key UNIQUE (account_id, name),
    CONSTRAINT domains_name_length CHECK (char_length(name) BETWEEN 1 AND 253),
    CONSTRAINT domains_name_lower CHECK (name = lower(name)),
    CONSTRAINT domains_score_range CHECK (score BETWEEN 0 AND 100),
    CONSTRAINT domains_tags_count CHECK (cardinality(tags) <= 20),
    CONSTRAINT domains_selectors_count CHECK (cardinality(dkim_selectors) <= 20)
);

-- The periodic scheduler pages through every domain by id.
-- (account_id, name) is served by domains_account_name_key.

-- One row per health computation, newest read first.
CREATE TABLE domain_health_history (
    id          uuid        PRIMARY KEY, -- UUIDv7
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    score       integer     NOT NULL,
    report      jsonb       NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT domain_health_history_score_range CHECK (score BETWEEN 0 AND 100)
);

CREATE INDEX domain_health_history_domain_idx ON domain_health_history (domain_id, computed_at DESC, id DESC);
-- Retention deletes by age across domains.
CREATE INDEX domain_health_history_computed_idx ON domain_health_history (computed_at);
