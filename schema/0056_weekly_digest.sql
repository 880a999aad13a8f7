-- The weekly digest (internal/weekly): an account's choices and the weeks
-- already mailed.

-- No row: the defaults (on, every domain, the daily digest kept).
CREATE TABLE weekly_digest_settings (
    account_id    uuid    PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    enabled       boolean NOT NULL DEFAULT true,
    -- Only these domains, or the domains with one of these tags; both
    -- empty: every domain.
    domains       text[]  NOT NULL DEFAULT '{}',
    tags          text[]  NOT NULL DEFAULT '{}',
    -- The weekly digest instead of the daily digest of events.
    replace_daily boolean NOT NULL DEFAULT false,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT weekly_digest_settings_bounds CHECK (cardinality(domains) <= 100 AND cardinality(tags) <= 20)
);

-- One row per account and week (the Monday it starts, UTC) mailed.
CREATE TABLE weekly_digests (
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    week       date        NOT NULL,
    domains    integer     NOT NULL,
    sent_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, week)
);
