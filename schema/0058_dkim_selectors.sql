-- A domain's DKIM selector inventory (internal/selectors): every selector
-- seen signing its mail in aggregate reports or published in DNS, with
-- when, by which sources, and its key. Written at ingest (in the report's
-- transaction) and by each DNS check (in the check's), never computed from
-- history at read time. At most 100 selectors per domain.
CREATE TABLE dkim_selectors (
    domain_id       uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    selector        text        NOT NULL CHECK (char_length(selector) BETWEEN 1 AND 63),
    first_seen_at   timestamptz NOT NULL,
    report_first_at timestamptz,
    report_last_at  timestamptz,
    dns_first_at    timestamptz,
    dns_last_at     timestamptz,
    -- The last DNS check that looked it up found a key.
    published       boolean     NOT NULL DEFAULT false,
    key_type        text        NOT NULL DEFAULT '',
    key_bits        integer     NOT NULL DEFAULT 0,
    -- Source IPs seen signing with it, the latest first, at most 10.
    sources         text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(sources) <= 10),
    -- When dkim_selector_idle was raised; cleared when reports show it again.
    idle_since      timestamptz,
    -- The record dkim_key_weak was raised for (a new weak key raises again).
    weak_record     text,
    PRIMARY KEY (domain_id, selector)
);

CREATE INDEX dkim_selectors_idle_idx ON dkim_selectors ((coalesce(report_last_at, first_seen_at)))
    WHERE published AND idle_since IS NULL;

ALTER TABLE dkim_selectors ENABLE ROW LEVEL SECURITY;
CREATE POLICY dkim_selectors_tenant_read ON dkim_selectors FOR SELECT TO authenticated
    USING (EXISTS (SELECT 1 FROM domains d WHERE d.id = domain_id AND d.account_id = mailwatch_jwt_account_id()));
GRANT SELECT (domain_id, selector, first_seen_at, report_first_at, report_last_at, dns_first_at, dns_last_at, published,
    key_type, key_bits, sources, idle_since) ON dkim_selectors TO authenticated;

CREATE VIEW data_api.dkim_selectors WITH (security_invoker = true) AS
    SELECT domain_id, selector, first_seen_at, report_first_at, report_last_at, dns_first_at, dns_last_at, published,
           key_type, key_bits, sources, idle_since
    FROM public.dkim_selectors;
GRANT SELECT ON data_api.dkim_selectors TO authenticated;
