-- dmarc_records becomes a range-partitioned table (docs/partitions.md), a
-- month per partition, by report_id: the UUIDv7 of its report, made when
-- the report is parsed. Every read of records is by report (the report's
-- page), so it reads one partition; the records are written with COPY,
-- which Postgres routes to the partition. Converted in place as
-- message_events was (0027, mailwatch_attach_legacy); the primary key
-- (report_id, ordinal) already holds the partition key, so nothing is
-- rebuilt. Reports are kept as long as their domain, so no partition is
-- dropped: a retention for report details would be one line in
-- internal/partitions.

DROP VIEW data_api.dmarc_records;

ALTER TABLE dmarc_records RENAME TO dmarc_records_legacy;
ALTER INDEX dmarc_records_pkey RENAME TO dmarc_records_legacy_pkey;
ALTER TABLE dmarc_records_legacy RENAME CONSTRAINT dmarc_records_report_id_fkey TO dmarc_records_legacy_report_id_fkey;

-- The records of a report, written with COPY (0008).
CREATE TABLE dmarc_records (
    report_id     uuid    NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
    ordinal       integer NOT NULL,
    source_ip     text    NOT NULL,
    count         bigint  NOT NULL,
    disposition   text    NOT NULL,
    dkim          text    NOT NULL,
    spf           text    NOT NULL,
    header_from   text    NOT NULL,
    envelope_from text    NOT NULL,
    envelope_to   text    NOT NULL,
    reasons       jsonb   NOT NULL,
    dkim_results  jsonb   NOT NULL,
    spf_results   jsonb   NOT NULL,
    CONSTRAINT dmarc_records_pkey PRIMARY KEY (report_id, ordinal)
) PARTITION BY RANGE (report_id);

CREATE TABLE dmarc_records_default PARTITION OF dmarc_records DEFAULT;

DROP POLICY dmarc_records_tenant_read ON dmarc_records_legacy;
REVOKE ALL ON dmarc_records_legacy FROM authenticated;

SELECT mailwatch_attach_legacy('dmarc_records', 'dmarc_records_legacy', 'report_id',
                               mailwatch_uuidv7_floor(mailwatch_next_boundary('month'))::text);

ALTER TABLE dmarc_records ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_records_tenant_read ON dmarc_records FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id
                   WHERE r.id = dmarc_records.report_id AND d.account_id = mailwatch_jwt_account_id()));
GRANT SELECT (report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from, envelope_from,
              envelope_to, reasons, dkim_results, spf_results) ON dmarc_records TO authenticated;

CREATE VIEW data_api.dmarc_records WITH (security_invoker = true) AS
    SELECT report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from, envelope_from,
           envelope_to, reasons, dkim_results, spf_results
    FROM public.dmarc_records;
GRANT SELECT ON data_api.dmarc_records TO authenticated;
