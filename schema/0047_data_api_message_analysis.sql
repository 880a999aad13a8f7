-- The data API reads the deliverability analysis of received messages
-- (docs/features/deliverability.md) and the SMTP session they were judged
-- by: the report as stored (NULL until the analysis job ran, and for
-- messages that did not come over SMTP), when it was stored, and the
-- session's client address (as text), HELO name, MAIL FROM, TLS version and
-- cipher. The tenant boundary stays receiver_messages' RLS policy
-- (schema/0010_data_api.sql); the grant adds the columns to the ones the
-- role may read. CREATE OR REPLACE VIEW may only append columns, which is
-- what this does.
GRANT SELECT (analysis, analyzed_at, smtp_client_ip, smtp_helo, smtp_mail_from, smtp_tls_version, smtp_tls_cipher)
    ON receiver_messages TO authenticated;

CREATE OR REPLACE VIEW data_api.messages WITH (security_invoker = true) AS
    SELECT id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body, parsed,
           size_bytes, received_at,
           analysis, analyzed_at, host(smtp_client_ip) AS smtp_client_ip, smtp_helo, smtp_mail_from,
           smtp_tls_version, smtp_tls_cipher
    FROM public.receiver_messages;
