-- The data API's views also answer under the REST API's names for the same
-- values, so a front end moving between the two finds the field it knows:
-- data_api.domains has `domain` (the REST name) beside `name`, and so on.
-- The old names stay: this only appends columns (CREATE OR REPLACE VIEW
-- keeps the existing ones, their order and the grants), so every query
-- that worked still does. internal/dataapi/restnames.go lists every pair,
-- these aliases and the differences left to the documentation; a test holds
-- that list to the views and to the REST API's JSON.
--
-- The aliases read the same base columns, already granted to
-- `authenticated`; the views stay security_invoker, so row-level security
-- is unchanged. Message bodies (text_body/html_body, REST text/html) get no
-- alias: select=* would send each body twice.

CREATE OR REPLACE VIEW data_api.domains WITH (security_invoker = true) AS
    SELECT id, account_id, name, tags, dkim_selectors, created_at, updated_at, checked_at, results,
           check_status, score, health, scored_at,
           name AS domain, check_status AS checks
    FROM public.domains;

CREATE OR REPLACE VIEW data_api.events WITH (security_invoker = true) AS
    SELECT id, account_id, event_type, severity, domain, tags, payload, created_at, acknowledged_at,
           acknowledged_by, acknowledged_note,
           acknowledged_note AS note
    FROM public.events;

CREATE OR REPLACE VIEW data_api.suppressions WITH (security_invoker = true) AS
    SELECT id, account_id, email, reason, domain, provider_id, source_event_id, created_at,
           created_at AS since
    FROM public.suppressions;

CREATE OR REPLACE VIEW data_api.received_reports WITH (security_invoker = true) AS
    SELECT id, account_id, domain_id, kind, source, raw_size, status, reason, report_type, failure,
           received_at, parsed_at,
           raw_size AS size_bytes
    FROM public.report_messages;

CREATE OR REPLACE VIEW data_api.dmarc_reports WITH (security_invoker = true) AS
    SELECT id, domain_id, message_id, org_name, report_id, email, begin_at, end_at, policy_domain, policy,
           version, record_count, message_count, pass_count, created_at,
           begin_at AS begin, end_at AS "end", record_count AS records, message_count AS messages,
           pass_count AS passing
    FROM public.dmarc_reports;

CREATE OR REPLACE VIEW data_api.tls_reports WITH (security_invoker = true) AS
    SELECT id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at, successful_count,
           failure_count, policies, created_at,
           begin_at AS begin, end_at AS "end", successful_count AS successful_sessions,
           failure_count AS failed_sessions
    FROM public.tls_reports;

CREATE OR REPLACE VIEW data_api.dns_connection_links WITH (security_invoker = true) AS
    SELECT domain_id, connection_id, zone_name, zone_id, created_at,
           zone_name AS zone, created_at AS linked_at
    FROM public.dns_connection_links;

CREATE OR REPLACE VIEW data_api.dns_recommendations WITH (security_invoker = true) AS
    SELECT id, domain_id, key, check_name, severity, name, rtype, op, current, proposed, why, manual,
           fingerprint, state, dismissed_reason, dismissed_until, last_error, applied_at, created_at, updated_at,
           check_name AS "check", rtype AS type
    FROM public.dns_recommendations;

CREATE OR REPLACE VIEW data_api.preference_groups WITH (security_invoker = true) AS
    SELECT account_id, group_name, email, webhook, updated_at,
           group_name AS name
    FROM public.preference_groups;
