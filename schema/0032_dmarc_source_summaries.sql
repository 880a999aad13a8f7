-- A domain's sources listing and guidance sum its daily source rows over a
-- window on every read, and those rows grow with the source IPs it sees.
-- A read now stores what it summed (per source IP: volumes and DKIM
-- selectors) and the next read of the same window reuses it while the
-- domain's daily rows are unchanged. Names (reverse DNS, sender map) are
-- applied at read time, so PTRs learned later need no invalidation.

-- The state of a domain's dmarc_source_days: every statement that writes
-- them sets a fresh value (a sequence never hands out a value twice, so a
-- rolled-back writer's value is never seen again). No row: never written
-- since this migration (version 0).
CREATE SEQUENCE dmarc_source_version_seq;

CREATE TABLE dmarc_source_versions (
    domain_id uuid   PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE,
    version   bigint NOT NULL
);

-- At most one summary per domain and window kind (0: the 30 days ending
-- today, which the guidance and the default listing read; 1: the latest
-- other window asked for). Valid only while version is the domain's.
CREATE TABLE dmarc_source_summaries (
    domain_id       uuid     NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    kind            smallint NOT NULL,
    since_day       date     NOT NULL,
    until_day       date     NOT NULL,
    version         bigint   NOT NULL,
    -- The bounded read's outcome (MaxSourceRowsRead): the first day read
    -- when the window held more rows.
    truncated       boolean  NOT NULL,
    period_since    date     NOT NULL,
    -- Per source IP, most volume first (MaxSourceGroups at most).
    source_ips      text[]   NOT NULL,
    messages        bigint[] NOT NULL,
    dkim_aligned    bigint[] NOT NULL,
    spf_aligned     bigint[] NOT NULL,
    compliant       bigint[] NOT NULL,
    forwarded       bigint[] NOT NULL,
    failing         bigint[] NOT NULL,
    -- Each IP's DKIM selectors, sorted: selector_counts[i] of them in
    -- selectors, in source_ips order.
    selector_counts integer[] NOT NULL,
    selectors       text[]   NOT NULL,
    computed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (domain_id, kind)
);

-- Bumps the version of every domain whose daily rows a statement wrote.
-- A domain deleted by the same statement (the cascade) is skipped.
CREATE FUNCTION dmarc_source_days_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dmarc_source_versions AS v (domain_id, version)
    SELECT c.domain_id, nextval('dmarc_source_version_seq')
    FROM (SELECT DISTINCT domain_id FROM changed_rows) c
    WHERE EXISTS (SELECT 1 FROM domains d WHERE d.id = c.domain_id)
    ORDER BY c.domain_id
    ON CONFLICT (domain_id) DO UPDATE SET version = EXCLUDED.version;
    RETURN NULL;
END
$$;

CREATE FUNCTION dmarc_source_days_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dmarc_source_summaries;
    RETURN NULL;
END
$$;

CREATE TRIGGER dmarc_source_days_bump_insert AFTER INSERT ON dmarc_source_days
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dmarc_source_days_bump();
CREATE TRIGGER dmarc_source_days_bump_update AFTER UPDATE ON dmarc_source_days
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dmarc_source_days_bump();
CREATE TRIGGER dmarc_source_days_bump_delete AFTER DELETE ON dmarc_source_days
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dmarc_source_days_bump();
CREATE TRIGGER dmarc_source_days_truncate AFTER TRUNCATE ON dmarc_source_days
    FOR EACH STATEMENT EXECUTE FUNCTION dmarc_source_days_truncate();
