-- Reports are never lost to a parser bug, and one report costs reads and
-- writes in proportion to its own size.
--
-- * The raw bytes of a report the parser failed on are kept (bounded per
--   domain and by age, see internal/reports) so that the reparse-reports
--   maintenance task can parse them after an upgrade. The partial index
--   holds only those rows: it sums a domain's kept bytes, and the reparse
--   and prune jobs walk it.
-- * A parse asks which of its source IPs the domain's reports named before;
--   without an index on (domain, source IP) that read every row of the
--   domain's history, once per report.
CREATE INDEX report_messages_failed_raw_idx ON report_messages (domain_id, id)
    WHERE status = 'failed' AND raw IS NOT NULL;

CREATE INDEX dmarc_source_days_source_idx ON dmarc_source_days (domain_id, source_ip);
