-- The data API's tables added after 0010: sending providers and what their
-- webhooks produced, DMARC and TLS reports, DNS connections and fixes, and
-- custom inbound subdomains. Same pattern as 0010_data_api.sql: policies
-- for reads of one's own rows (keyed on the claims' "sub" through
-- mailwatch_jwt_account_id()), column grants of the public fields only
-- (never a sealed secret, a hash or a raw body), and security_invoker views
-- in schema data_api named as the API names them. No role but the owner can
-- write, so writes through the data API are refused.

-- The same function as 0010's, written as one expression without FROM so
-- that the planner inlines it into every policy: 0010's body (a SELECT
-- FROM a subquery) cannot be inlined, so each query parsed and planned it
-- again, which was most of a small data-API read's time in Postgres.
-- Same answer: the claims' "sub" as a uuid, or NULL when it is not one.
CREATE OR REPLACE FUNCTION mailwatch_jwt_account_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN nullif(current_setting('request.jwt.claims', true), '')::json ->> 'sub'
             ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
        THEN (nullif(current_setting('request.jwt.claims', true), '')::json ->> 'sub')::uuid
    END
$$;

-- Policies. Tables without an account column are owned through their
-- domain (or report); the subquery runs as the caller, under the same
-- policies.
ALTER TABLE sending_providers ENABLE ROW LEVEL SECURITY;
CREATE POLICY sending_providers_tenant_read ON sending_providers FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE sending_provider_links ENABLE ROW LEVEL SECURITY;
CREATE POLICY sending_provider_links_tenant_read ON sending_provider_links FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM sending_providers p WHERE p.id = provider_id AND p.account_id = mailwatch_jwt_account_id()));

ALTER TABLE message_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY message_events_tenant_read ON message_events FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE suppressions ENABLE ROW LEVEL SECURITY;
CREATE POLICY suppressions_tenant_read ON suppressions FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE message_spikes ENABLE ROW LEVEL SECURITY;
CREATE POLICY message_spikes_tenant_read ON message_spikes FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE report_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY report_messages_tenant_read ON report_messages FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE dmarc_reports ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_reports_tenant_read ON dmarc_reports FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE dmarc_records ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_records_tenant_read ON dmarc_records FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id
                   WHERE r.id = dmarc_records.report_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE dmarc_source_days ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_source_days_tenant_read ON dmarc_source_days FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE tls_reports ENABLE ROW LEVEL SECURITY;
CREATE POLICY tls_reports_tenant_read ON tls_reports FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE dns_connections ENABLE ROW LEVEL SECURITY;
CREATE POLICY dns_connections_tenant_read ON dns_connections FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());

ALTER TABLE dns_connection_links ENABLE ROW LEVEL SECURITY;
CREATE POLICY dns_connection_links_tenant_read ON dns_connection_links FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE dns_recommendations ENABLE ROW LEVEL SECURITY;
CREATE POLICY dns_recommendations_tenant_read ON dns_recommendations FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

ALTER TABLE mx_setups ENABLE ROW LEVEL SECURITY;
CREATE POLICY mx_setups_tenant_read ON mx_setups FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));

-- Column grants: the public fields only. Not granted: the providers' and
-- DNS connections' sealed secrets (secret_ciphertext, secret_key_id),
-- recipient and email hashes, the raw report bytes, and internal job ids.
-- A policy's subquery reads id, domain_id and account_id as the caller, so
-- those are granted wherever a policy uses them.
GRANT SELECT (id, account_id, kind, label, config, last_payload_at, created_at, updated_at)
    ON sending_providers TO authenticated;
GRANT SELECT (provider_id, domain_id, created_at) ON sending_provider_links TO authenticated;
GRANT SELECT (id, account_id, provider_id, provider_kind, event_id, message_id, event_type, bounce_class,
              recipient, domain, domain_id, unlinked, classification, detail, occurred_at, received_at)
    ON message_events TO authenticated;
GRANT SELECT (id, account_id, email, reason, domain, provider_id, source_event_id, created_at)
    ON suppressions TO authenticated;
GRANT SELECT (domain_id, provider_id, kind, active, started_at, ended_at, event_id, rate, checked_at)
    ON message_spikes TO authenticated;
GRANT SELECT (id, account_id, domain_id, kind, source, raw_size, status, reason, report_type, failure,
              received_at, parsed_at) ON report_messages TO authenticated;
GRANT SELECT (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at, policy_domain, policy,
              version, record_count, message_count, pass_count, created_at) ON dmarc_reports TO authenticated;
GRANT SELECT (report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from, envelope_from,
              envelope_to, reasons, dkim_results, spf_results) ON dmarc_records TO authenticated;
GRANT SELECT (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing,
              dkim_selectors) ON dmarc_source_days TO authenticated;
GRANT SELECT (id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at, successful_count,
              failure_count, policies, created_at) ON tls_reports TO authenticated;
GRANT SELECT (id, account_id, kind, label, config, verified_at, created_at, updated_at)
    ON dns_connections TO authenticated;
GRANT SELECT (domain_id, connection_id, zone_name, zone_id, created_at) ON dns_connection_links TO authenticated;
GRANT SELECT (id, domain_id, key, check_name, severity, name, rtype, op, current, proposed, why, manual,
              fingerprint, state, dismissed_reason, dismissed_until, last_error, applied_at, created_at, updated_at)
    ON dns_recommendations TO authenticated;
GRANT SELECT (id, domain_id, name, token, state, problems, last_checked_at, verified_at, created_at, updated_at)
    ON mx_setups TO authenticated;

-- The views (security_invoker: a plain view would run as its owner and
-- bypass the policies).
CREATE VIEW data_api.providers WITH (security_invoker = true) AS
    SELECT id, account_id, kind, label, config, last_payload_at, created_at, updated_at
    FROM public.sending_providers;

CREATE VIEW data_api.provider_links WITH (security_invoker = true) AS
    SELECT provider_id, domain_id, created_at FROM public.sending_provider_links;

CREATE VIEW data_api.message_events WITH (security_invoker = true) AS
    SELECT id, account_id, provider_id, provider_kind, event_id, message_id, event_type, bounce_class,
           recipient, domain, domain_id, unlinked, classification, detail, occurred_at, received_at
    FROM public.message_events;

CREATE VIEW data_api.suppressions WITH (security_invoker = true) AS
    SELECT id, account_id, email, reason, domain, provider_id, source_event_id, created_at
    FROM public.suppressions;

CREATE VIEW data_api.message_spikes WITH (security_invoker = true) AS
    SELECT domain_id, provider_id, kind, active, started_at, ended_at, event_id, rate, checked_at
    FROM public.message_spikes;

CREATE VIEW data_api.received_reports WITH (security_invoker = true) AS
    SELECT id, account_id, domain_id, kind, source, raw_size, status, reason, report_type, failure,
           received_at, parsed_at
    FROM public.report_messages;

CREATE VIEW data_api.dmarc_reports WITH (security_invoker = true) AS
    SELECT id, domain_id, message_id, org_name, report_id, email, begin_at, end_at, policy_domain, policy,
           version, record_count, message_count, pass_count, created_at
    FROM public.dmarc_reports;

CREATE VIEW data_api.dmarc_records WITH (security_invoker = true) AS
    SELECT report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from, envelope_from,
           envelope_to, reasons, dkim_results, spf_results
    FROM public.dmarc_records;

CREATE VIEW data_api.dmarc_sources WITH (security_invoker = true) AS
    SELECT domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing,
           dkim_selectors
    FROM public.dmarc_source_days;

CREATE VIEW data_api.tls_reports WITH (security_invoker = true) AS
    SELECT id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at, successful_count,
           failure_count, policies, created_at
    FROM public.tls_reports;

CREATE VIEW data_api.dns_connections WITH (security_invoker = true) AS
    SELECT id, account_id, kind, label, config, verified_at, created_at, updated_at
    FROM public.dns_connections;

CREATE VIEW data_api.dns_connection_links WITH (security_invoker = true) AS
    SELECT domain_id, connection_id, zone_name, zone_id, created_at FROM public.dns_connection_links;

CREATE VIEW data_api.dns_recommendations WITH (security_invoker = true) AS
    SELECT id, domain_id, key, check_name, severity, name, rtype, op, current, proposed, why, manual,
           fingerprint, state, dismissed_reason, dismissed_until, last_error, applied_at, created_at, updated_at
    FROM public.dns_recommendations;

CREATE VIEW data_api.mx_setups WITH (security_invoker = true) AS
    SELECT id, domain_id, name, token, state, problems, last_checked_at, verified_at, created_at, updated_at
    FROM public.mx_setups;

GRANT SELECT ON ALL TABLES IN SCHEMA data_api TO authenticated;
