-- Who sends a domain's aggregate reports, and when they last did, for the
-- report heartbeat (internal/reports, heartbeat.go): a reporter that sent
-- daily and fell silent for 3 days raises dmarc_reports_stopped; a report
-- of it after that raises dmarc_reports_resumed. Written at ingest, in
-- the transaction that stores the report, so the watch never reads
-- dmarc_reports.
CREATE TABLE dmarc_reporters (
    domain_id     uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    -- The report's org_name, trimmed and lower-cased (internal/reports
    -- ReporterName).
    reporter      text        NOT NULL CHECK (char_length(reporter) BETWEEN 1 AND 100),
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    -- The UTC days a report of it arrived, oldest first, the last 14.
    recent_days   date[]      NOT NULL CHECK (cardinality(recent_days) <= 14),
    reports       bigint      NOT NULL,
    -- Set when dmarc_reports_stopped was raised; cleared by its next report.
    stopped_at    timestamptz,
    PRIMARY KEY (domain_id, reporter)
);

CREATE INDEX dmarc_reporters_watch_idx ON dmarc_reporters (last_seen_at) WHERE stopped_at IS NULL;

-- The rate limit of dmarc_failure_report: one event per domain per hour,
-- the failure reports in between counted into the next.
CREATE TABLE dmarc_failure_notices (
    domain_id       uuid        PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE,
    last_emitted_at timestamptz NOT NULL,
    suppressed      integer     NOT NULL DEFAULT 0
);

-- The data API: one's own domains' reporters.
ALTER TABLE dmarc_reporters ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_reporters_tenant_read ON dmarc_reporters FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));
GRANT SELECT (domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports, stopped_at)
    ON dmarc_reporters TO authenticated;

CREATE VIEW data_api.dmarc_reporters WITH (security_invoker = true) AS
    SELECT domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports, stopped_at
    FROM public.dmarc_reporters;
GRANT SELECT ON data_api.dmarc_reporters TO authenticated;
