-- The dashboard summary counts an account's reports of the last 30 days.
-- Each DMARC or TLS report is already one reporter's aggregate of a day, so
-- the window holds about (domains x reporters x 30) of them whatever the
-- history kept: these indexes let each domain's window be read from the
-- index alone (its counts included), instead of scanning every report the
-- account ever received, and the refused and failed report messages (rare)
-- from a partial index.
CREATE INDEX dmarc_reports_domain_created_idx ON dmarc_reports (domain_id, created_at) INCLUDE (message_count, pass_count);
CREATE INDEX tls_reports_domain_created_idx ON tls_reports (domain_id, created_at);
CREATE INDEX report_messages_unusable_idx ON report_messages (account_id, received_at) WHERE status IN ('refused', 'failed');
