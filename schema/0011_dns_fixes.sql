-- DNS fixes: connections to customers' DNS providers, the domains linked to
-- them, the recommendations derived from each check, and custom inbound
-- (MX) subdomains.

-- A DNS connection. config holds the non-secret settings (server, key
-- name, algorithm, access key id, hosted zone id) for display; the whole
-- configuration, secrets included, is sealed in secret_ciphertext
-- (internal/secretbox, bound to the row id) and never shown again.
CREATE TABLE dns_connections (
    id                uuid        PRIMARY KEY, -- UUIDv7
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind              text        NOT NULL,
    label             text        NOT NULL,
    config            jsonb       NOT NULL DEFAULT '{}',
    secret_ciphertext bytea       NOT NULL,
    secret_key_id     text        NOT NULL,
    verified_at       timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dns_connections_account_label_key UNIQUE (account_id, label),
    CONSTRAINT dns_connections_kind CHECK (kind IN ('rfc2136', 'cloudflare', 'route53')),
    CONSTRAINT dns_connections_label_length CHECK (char_length(label) BETWEEN 1 AND 100)
);

-- A domain writes through at most one connection, into the zone found when
-- it was linked.
CREATE TABLE dns_connection_links (
    domain_id     uuid        PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE,
    connection_id uuid        NOT NULL REFERENCES dns_connections (id) ON DELETE CASCADE,
    zone_name     text        NOT NULL,
    zone_id       text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dns_connection_links_connection_idx ON dns_connection_links (connection_id);

-- One recommended RRset change per (domain, key); key names the rule and
-- the RRset (e.g. "spf"), so a recommendation keeps its id while the check
-- results it is computed from change. fingerprint hashes what was observed
-- (name, type, current records): apply is refused when it no longer
-- matches, and a dismissed recommendation reopens when it changes.
CREATE TABLE dns_recommendations (
    id                    uuid        PRIMARY KEY, -- UUIDv7
    domain_id             uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    key                   text        NOT NULL,
    check_name            text        NOT NULL,
    severity              text        NOT NULL,
    name                  text        NOT NULL,
    rtype                 text        NOT NULL,
    op                    text        NOT NULL,
    current               text[]      NOT NULL DEFAULT '{}',
    proposed              text[]      NOT NULL DEFAULT '{}',
    why                   text        NOT NULL,
    manual                boolean     NOT NULL DEFAULT false,
    fingerprint           text        NOT NULL,
    state                 text        NOT NULL DEFAULT 'open',
    dismissed_reason      text,
    dismissed_until       timestamptz,
    dismissed_fingerprint text,
    last_error            text,
    job_id                bigint,
    applied_at            timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dns_recommendations_domain_key UNIQUE (domain_id, key),
    CONSTRAINT dns_recommendations_state CHECK (state IN ('open', 'applying', 'applied', 'failed', 'dismissed')),
    CONSTRAINT dns_recommendations_op CHECK (op IN ('create', 'replace_rr', 'replace_rrset', 'delete_rr')),
    CONSTRAINT dns_recommendations_severity CHECK (severity IN ('info', 'warning', 'critical'))
);

-- A custom inbound subdomain (reports and receivers at the customer's own
-- name): verified by an MX to our inbound host and a TXT ownership token.
CREATE TABLE mx_setups (
    id              uuid        PRIMARY KEY, -- UUIDv7
    domain_id       uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    token           text        NOT NULL,
    state           text        NOT NULL DEFAULT 'pending',
    problems        text[]      NOT NULL DEFAULT '{}',
    last_checked_at timestamptz,
    verified_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mx_setups_domain_key UNIQUE (domain_id),
    CONSTRAINT mx_setups_state CHECK (state IN ('pending', 'verified', 'failed', 'lost'))
);

-- The SMTP listener looks verified names up; the periodic re-verification
-- pages through pending and verified setups.
CREATE UNIQUE INDEX mx_setups_verified_name_idx ON mx_setups (name) WHERE state = 'verified';
CREATE INDEX mx_setups_state_idx ON mx_setups (state, id);
