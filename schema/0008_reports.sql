-- DMARC aggregate and SMTP TLS reports: signed reporting addresses, the raw
-- reports as received until parsed, the parsed reports with their records,
-- and daily per-source aggregates for fast reads.

-- One signed local part per (domain, kind, key). The local part is a pure
-- function of the key and (account, domain), so minting is idempotent; the
-- row only lets the SMTP listener find the domain an address belongs to.
CREATE TABLE reporting_addresses (
    local_part text        PRIMARY KEY, -- lower case, "dmarc+<key id><mac>"
    domain_id  uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    account_id uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind       text        NOT NULL,
    key_id     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reporting_addresses_kind CHECK (kind IN ('dmarc', 'tlsrpt')),
    CONSTRAINT reporting_addresses_domain_kind_key UNIQUE (domain_id, kind, key_id)
);

-- Every report received (by mail, upload or HTTPS), kept raw until parsed.
-- The parse job moves status from pending to a final state in the same
-- transaction as the parsed rows, then drops the raw bytes.
CREATE TABLE report_messages (
    id          uuid        PRIMARY KEY, -- UUIDv7
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    -- What the address or route expects: dmarc (aggregate or failure
    -- reports) or tlsrpt.
    kind        text        NOT NULL,
    source      text        NOT NULL,
    raw         bytea,
    raw_size    integer     NOT NULL,
    status      text        NOT NULL DEFAULT 'pending',
    -- Why a report was refused or failed to parse; shown to the user.
    reason      text,
    -- aggregate, failure or tls once parsed.
    report_type text,
    -- The failure report's identity fields (arf.Report), never its body.
    failure     jsonb,
    received_at timestamptz NOT NULL DEFAULT now(),
    parsed_at   timestamptz,
    CONSTRAINT report_messages_kind CHECK (kind IN ('dmarc', 'tlsrpt')),
    CONSTRAINT report_messages_source CHECK (source IN ('smtp', 'upload', 'https')),
    CONSTRAINT report_messages_status CHECK (status IN ('pending', 'accepted', 'duplicate', 'refused', 'failed')),
    CONSTRAINT report_messages_raw_size CHECK (raw_size BETWEEN 0 AND 15728640)
);

CREATE INDEX report_messages_domain_idx ON report_messages (domain_id, id DESC);

-- Parsed aggregate reports, once per (reporter org, report id) per domain.
CREATE TABLE dmarc_reports (
    id            uuid        PRIMARY KEY, -- UUIDv7
    domain_id     uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    message_id    uuid        NOT NULL REFERENCES report_messages (id) ON DELETE CASCADE,
    org_name      text        NOT NULL,
    report_id     text        NOT NULL,
    email         text        NOT NULL,
    begin_at      timestamptz NOT NULL,
    end_at        timestamptz NOT NULL,
    policy_domain text        NOT NULL,
    policy        jsonb       NOT NULL, -- dmarcrpt.PolicyPublished
    version       text        NOT NULL,
    record_count  integer     NOT NULL,
    message_count bigint      NOT NULL,
    pass_count    bigint      NOT NULL, -- messages passing DMARC (aligned SPF or DKIM)
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dmarc_reports_dedup_key UNIQUE (domain_id, org_name, report_id)
);

CREATE INDEX dmarc_reports_domain_idx ON dmarc_reports (domain_id, id DESC);

-- The records of a report, written with COPY.
CREATE TABLE dmarc_records (
    report_id     uuid   NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
    ordinal       integer NOT NULL,
    source_ip     text   NOT NULL,
    count         bigint NOT NULL,
    disposition   text   NOT NULL,
    dkim          text   NOT NULL,
    spf           text   NOT NULL,
    header_from   text   NOT NULL,
    envelope_from text   NOT NULL,
    envelope_to   text   NOT NULL,
    reasons       jsonb  NOT NULL,
    dkim_results  jsonb  NOT NULL,
    spf_results   jsonb  NOT NULL,
    PRIMARY KEY (report_id, ordinal)
);

-- Per domain, day and source IP: what the reports said, summed. A report
-- spanning more than a day is spread over its days. Categories are computed
-- per record group at ingest (see internal/reports).
CREATE TABLE dmarc_source_days (
    domain_id      uuid    NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    day            date    NOT NULL,
    source_ip      text    NOT NULL,
    messages       bigint  NOT NULL,
    dkim_aligned   bigint  NOT NULL,
    spf_aligned    bigint  NOT NULL,
    compliant      bigint  NOT NULL,
    forwarded      bigint  NOT NULL,
    failing        bigint  NOT NULL,
    dkim_selectors text[]  NOT NULL DEFAULT '{}',
    PRIMARY KEY (domain_id, day, source_ip)
);

-- Reverse DNS of source IPs, shared by every account (public data).
CREATE TABLE source_ptrs (
    ip          text        PRIMARY KEY,
    ptr         text        NOT NULL, -- empty when none
    resolved_at timestamptz NOT NULL DEFAULT now()
);

-- Parsed SMTP TLS reports (RFC 8460), once per (org, report id) per domain.
CREATE TABLE tls_reports (
    id                 uuid        PRIMARY KEY, -- UUIDv7
    domain_id          uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    message_id         uuid        NOT NULL REFERENCES report_messages (id) ON DELETE CASCADE,
    org_name           text        NOT NULL,
    report_id          text        NOT NULL,
    contact_info       text        NOT NULL,
    begin_at           timestamptz NOT NULL,
    end_at             timestamptz NOT NULL,
    successful_count   bigint      NOT NULL,
    failure_count      bigint      NOT NULL,
    policies           jsonb       NOT NULL, -- []tlsrpt.Policy
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT tls_reports_dedup_key UNIQUE (domain_id, org_name, report_id)
);

CREATE INDEX tls_reports_domain_idx ON tls_reports (domain_id, id DESC);
