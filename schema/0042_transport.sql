-- Transport probes of every MX (internal/transport): what a sending server
-- sees at each address of each MX host of a domain (STARTTLS, the TLS
-- handshake, the certificate, DANE, forward-confirmed reverse DNS), and the
-- certificate-expiry notices already raised.
--
-- One row per (domain, MX host, address), replaced by each conclusive probe
-- of the host; a temporary (inconclusive) probe leaves the rows alone. A
-- host without any address has one row with address ''. account_id leads
-- every key: the rows are read per account and the data API filters on it.
CREATE TABLE mx_probe_results (
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id      uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    mx_host        text        NOT NULL,
    address        text        NOT NULL,
    port           integer     NOT NULL,
    -- The address's verdict (mxprobe.Verdict); host_verdict is the host's.
    verdict        text        NOT NULL,
    host_verdict   text        NOT NULL,
    problems       jsonb       NOT NULL DEFAULT '[]', -- []mxprobe.Problem
    starttls       boolean     NOT NULL DEFAULT false,
    tls_version    text,
    cipher_suite   text,
    verified       boolean,
    name_matches   boolean,
    matches_policy boolean,
    not_after      timestamptz,
    days_left      integer,
    fingerprint    text,
    -- dane_status is '' when no TLSA record is published under a validated
    -- answer, else an mxprobe.DANEStatus.
    dane_status    text        NOT NULL DEFAULT '',
    dane_rollover  boolean     NOT NULL DEFAULT false,
    fcrdns         boolean     NOT NULL DEFAULT false,
    ptr            text        NOT NULL DEFAULT '',
    probed_at      timestamptz NOT NULL,
    PRIMARY KEY (account_id, domain_id, mx_host, address),
    CONSTRAINT mx_probe_results_verdict CHECK (verdict IN ('ok', 'temporary', 'tls_failing', 'smtp_failing')),
    CONSTRAINT mx_probe_results_host_verdict CHECK (host_verdict IN ('ok', 'tls_failing', 'smtp_failing'))
);

-- The certificate_expiring notices raised: once per (domain, certificate,
-- threshold). A renewed certificate has another fingerprint, so its own
-- thresholds fire again.
CREATE TABLE mx_certificate_notices (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain_id   uuid        NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    fingerprint text        NOT NULL,
    threshold   integer     NOT NULL,
    mx_host     text        NOT NULL,
    not_after   timestamptz NOT NULL,
    sent_at     timestamptz NOT NULL,
    PRIMARY KEY (account_id, domain_id, fingerprint, threshold)
);

-- The data API (same pattern as 0012 and 0030): a read policy on the
-- account's rows, column grants, a security_invoker view.
ALTER TABLE mx_probe_results ENABLE ROW LEVEL SECURITY;
CREATE POLICY mx_probe_results_tenant_read ON mx_probe_results FOR SELECT TO authenticated
    USING (account_id = mailwatch_jwt_account_id());
GRANT SELECT (account_id, domain_id, mx_host, address, port, verdict, host_verdict, problems, starttls, tls_version,
              cipher_suite, verified, name_matches, matches_policy, not_after, days_left, fingerprint, dane_status,
              dane_rollover, fcrdns, ptr, probed_at)
    ON mx_probe_results TO authenticated;

ALTER TABLE mx_certificate_notices ENABLE ROW LEVEL SECURITY;

CREATE VIEW data_api.mx_transport WITH (security_invoker = true) AS
    SELECT account_id, domain_id, mx_host, address, port, verdict, host_verdict, problems, starttls, tls_version,
           cipher_suite, verified, name_matches, matches_policy, not_after, days_left, fingerprint, dane_status,
           dane_rollover, fcrdns, ptr, probed_at
    FROM public.mx_probe_results;

GRANT SELECT ON data_api.mx_transport TO authenticated;
