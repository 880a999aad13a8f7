-- The names DMARC aggregate reports show mail claiming in its From header
-- (header_from), per domain (internal/reports subdomains.go,
-- docs/features/reports.md): daily counters, the names known per domain
-- with when they were first and last seen, and whether each exists in DNS.

-- Per domain, UTC day and header_from name: the messages of the domain's
-- DMARC records claiming it and how many of them passed DMARC (aligned DKIM
-- or SPF), summed at ingest in the transaction that stores the records and
-- spread over a report's days as dmarc_source_days is. The name is the
-- domain itself or one of its subdomains, normalised (internal/domainname);
-- only names known in dmarc_subdomains are counted, so a domain has at most
-- that table's bound of names a day.
CREATE TABLE dmarc_header_from_days (
    domain_id   uuid   NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    day         date   NOT NULL,
    header_from text   NOT NULL,
    messages    bigint NOT NULL,
    passing     bigint NOT NULL,
    PRIMARY KEY (domain_id, day, header_from)
);

-- The names known per domain (the domain itself among them), at most 1,000
-- a domain (reports.MaxKnownSubdomains): first_seen is the first day of
-- the report that first claimed the name, with that report's messages and
-- passing messages for it; last_seen the last day of the latest report
-- claiming it. dns_exists is what the last lookup said (false: NXDOMAIN;
-- NULL: not looked up yet, or the lookup failed), dns_checked_at when.
CREATE TABLE dmarc_subdomains (
    domain_id      uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    name           text        NOT NULL,
    first_seen     date        NOT NULL,
    last_seen      date        NOT NULL,
    first_messages bigint      NOT NULL,
    first_passing  bigint      NOT NULL,
    dns_exists     boolean,
    dns_checked_at timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (domain_id, name)
);

-- The lookup job takes the names never looked up, or looked up longest ago.
CREATE INDEX dmarc_subdomains_dns_checked ON dmarc_subdomains (domain_id, dns_checked_at NULLS FIRST);

-- The data API: one's own rows under RLS through the domain, as
-- dmarc_source_days (0012). The view adds the messages and passing messages
-- of each name over the last 30 UTC days (today included, as the REST
-- listing sums them) from the daily counters, read as the caller.
ALTER TABLE dmarc_header_from_days ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_header_from_days_tenant_read ON dmarc_header_from_days FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));
GRANT SELECT (domain_id, day, header_from, messages, passing) ON dmarc_header_from_days TO authenticated;

ALTER TABLE dmarc_subdomains ENABLE ROW LEVEL SECURITY;
CREATE POLICY dmarc_subdomains_tenant_read ON dmarc_subdomains FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));
GRANT SELECT (domain_id, name, first_seen, last_seen, first_messages, first_passing, dns_exists, dns_checked_at)
    ON dmarc_subdomains TO authenticated;

CREATE VIEW data_api.dmarc_subdomains WITH (security_invoker = true) AS
    SELECT s.domain_id, s.name, s.first_seen, s.last_seen, s.first_messages, s.first_passing,
           coalesce(w.messages, 0)::bigint AS messages, coalesce(w.passing, 0)::bigint AS passing,
           s.dns_exists, s.dns_checked_at
    FROM public.dmarc_subdomains s
    LEFT JOIN LATERAL (
        SELECT sum(h.messages) AS messages, sum(h.passing) AS passing
        FROM public.dmarc_header_from_days h
        WHERE h.domain_id = s.domain_id AND h.header_from = s.name AND h.day > (now() AT TIME ZONE 'UTC')::date - 30
    ) w ON true;
GRANT SELECT ON data_api.dmarc_subdomains TO authenticated;
