-- The SMTP session a message arrived in, recorded with the message so that
-- its deliverability analysis (internal/deliverability) can judge it as the
-- receiving server did: the client's address, its HELO name, the exact MAIL
-- FROM (sender falls back to the From header for a bounce, so it cannot
-- say "<>"), and the TLS version and cipher. All NULL for messages that did
-- not come over SMTP (ingress webhooks, SMS); tls_version and tls_cipher are
-- NULL for a session without TLS. New columns without defaults: adding them
-- rewrites nothing, and the data API's column grants do not include them.
ALTER TABLE receiver_messages
    ADD COLUMN smtp_client_ip   inet,
    ADD COLUMN smtp_helo        text,
    ADD COLUMN smtp_mail_from   text,
    ADD COLUMN smtp_tls_version text,
    ADD COLUMN smtp_tls_cipher  text;

-- The deliverability analysis of a message received over SMTP
-- (deliverability.Report as JSON), written by its River job after the
-- message is stored; NULL until then, and for messages without a session.
ALTER TABLE receiver_messages
    ADD COLUMN analysis    jsonb,
    ADD COLUMN analyzed_at timestamptz;
