-- A domain's DMARC volume per UTC day and source category, for its daily
-- chart: one row per domain and day, whatever the number of source IPs
-- behind it, so a read of N days reads N rows (dmarc_source_days holds a
-- row per day and source IP, and grows with the IPs a domain sees).
--
-- Written at ingest, in the transaction that adds the report to
-- dmarc_source_days and spread over the same days with the same shares,
-- after the domain's version lock (DMARCSourceVersionBump), which orders
-- the writers of one domain. A failing IP is non_compliant when its
-- reverse DNS name, as the report's parse resolved it, names a known
-- sender, threat_unknown otherwise (internal/reports, classify.go).
CREATE TABLE dmarc_domain_days (
    domain_id      uuid   NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    day            date   NOT NULL,
    compliant      bigint NOT NULL,
    forwarded      bigint NOT NULL,
    non_compliant  bigint NOT NULL,
    threat_unknown bigint NOT NULL,
    PRIMARY KEY (domain_id, day)
);

-- The domains whose reports were stored before this table: their rows
-- are rebuilt from dmarc_source_days and the cached reverse DNS names
-- (source_ptrs) by the dmarc_days_backfill job, a few domains per run,
-- which deletes each domain's row here when it is done.
CREATE TABLE dmarc_domain_days_backfill (
    domain_id uuid PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE
);

INSERT INTO dmarc_domain_days_backfill (domain_id)
SELECT DISTINCT domain_id FROM dmarc_source_days;
