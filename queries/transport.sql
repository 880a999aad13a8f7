-- name: TransportResultsByDomain :many
SELECT * FROM mx_probe_results
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid
ORDER BY mx_host, address;

-- name: TransportResultsByHostForUpdate :many
-- The host's stored rows, locked: the previous state a probe compares with.
SELECT * FROM mx_probe_results
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND mx_host = @mx_host::text
ORDER BY address
FOR UPDATE;

-- name: TransportDeleteHost :exec
DELETE FROM mx_probe_results
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND mx_host = @mx_host::text;

-- name: TransportDeleteOtherHosts :exec
-- Drops the rows of hosts that are no longer MX hosts of the domain.
DELETE FROM mx_probe_results
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND NOT (mx_host = ANY(@hosts::text[]));

-- name: TransportInsert :exec
INSERT INTO mx_probe_results (account_id, domain_id, mx_host, address, port, verdict, host_verdict, problems, starttls,
    tls_version, cipher_suite, verified, name_matches, matches_policy, not_after, days_left, fingerprint, dane_status,
    dane_rollover, fcrdns, ptr, probed_at)
VALUES (@account_id::uuid, @domain_id::uuid, @mx_host::text, @address::text, @port::integer, @verdict::text,
    @host_verdict::text, @problems::jsonb, @starttls::boolean, sqlc.narg(tls_version)::text,
    sqlc.narg(cipher_suite)::text, sqlc.narg(verified)::boolean, sqlc.narg(name_matches)::boolean,
    sqlc.narg(matches_policy)::boolean, sqlc.narg(not_after)::timestamptz, sqlc.narg(days_left)::integer,
    sqlc.narg(fingerprint)::text, @dane_status::text, @dane_rollover::boolean, @fcrdns::boolean, @ptr::text,
    @probed_at::timestamptz);

-- name: TransportNoticeInsert :execrows
-- Records a certificate_expiring notice; 0 rows when it was already raised.
INSERT INTO mx_certificate_notices (account_id, domain_id, fingerprint, threshold, mx_host, not_after, sent_at)
VALUES (@account_id::uuid, @domain_id::uuid, @fingerprint::text, @threshold::integer, @mx_host::text,
    @not_after::timestamptz, @sent_at::timestamptz)
ON CONFLICT DO NOTHING;

-- name: TransportFailingEnforced :one
-- Whether a domain has an MX host whose stored probe fails while senders
-- verify (MTA-STS enforce or DANE published): the health cap's input.
SELECT count(DISTINCT mx_host)::integer AS failing
FROM mx_probe_results
WHERE account_id = @account_id::uuid AND domain_id = @domain_id::uuid AND host_verdict <> 'ok'
  AND (@enforced::boolean OR dane_status <> '');

-- name: TransportTLSRPTFailures :many
-- Failed TLS sessions per receiving MX host named in the domain's TLS
-- reports that began since @since.
SELECT lower(rtrim(fd->>'receiving-mx-hostname', '.'))::text AS mx_host,
       sum((fd->>'failed-session-count')::bigint)::bigint AS failures
FROM tls_reports r,
     jsonb_array_elements(r.policies) AS p,
     jsonb_array_elements(coalesce(p->'failure-details', '[]'::jsonb)) AS fd
WHERE r.domain_id = @domain_id::uuid AND r.begin_at >= @since::timestamptz
  AND coalesce(fd->>'receiving-mx-hostname', '') <> ''
GROUP BY 1;
