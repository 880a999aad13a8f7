-- name: DNSRecommendationListByDomain :many
SELECT * FROM dns_recommendations WHERE domain_id = @domain_id::uuid ORDER BY key;

-- name: DNSRecommendationListByDomainForUpdate :many
SELECT * FROM dns_recommendations WHERE domain_id = @domain_id::uuid ORDER BY key FOR UPDATE;

-- name: DNSRecommendationGetForUpdate :one
SELECT * FROM dns_recommendations WHERE id = @id::uuid AND domain_id = @domain_id::uuid FOR UPDATE;

-- name: DNSRecommendationGetByIDForUpdate :one
SELECT * FROM dns_recommendations WHERE id = @id::uuid FOR UPDATE;

-- name: DNSRecommendationUpsert :one
-- Writes the recommendation computed from the latest check. The caller
-- decides the state (a dismissed one stays dismissed while its fingerprint
-- holds).
INSERT INTO dns_recommendations (id, domain_id, key, check_name, severity, name, rtype, op, current, proposed, why, manual, fingerprint, state)
VALUES (@id::uuid, @domain_id::uuid, @key::text, @check_name::text, @severity::text, @name::text, @rtype::text, @op::text,
        @current::text[], @proposed::text[], @why::text, @manual::boolean, @fingerprint::text, @state::text)
ON CONFLICT (domain_id, key) DO UPDATE SET
    check_name = excluded.check_name, severity = excluded.severity, name = excluded.name, rtype = excluded.rtype,
    op = excluded.op, current = excluded.current, proposed = excluded.proposed, why = excluded.why,
    manual = excluded.manual, fingerprint = excluded.fingerprint, state = excluded.state,
    dismissed_reason = CASE WHEN excluded.state = 'dismissed' THEN dns_recommendations.dismissed_reason END,
    dismissed_until = CASE WHEN excluded.state = 'dismissed' THEN dns_recommendations.dismissed_until END,
    dismissed_fingerprint = CASE WHEN excluded.state = 'dismissed' THEN dns_recommendations.dismissed_fingerprint END,
    last_error = CASE WHEN excluded.state IN ('failed', 'applied') THEN dns_recommendations.last_error END,
    updated_at = now()
RETURNING *;

-- name: DNSRecommendationDelete :exec
DELETE FROM dns_recommendations WHERE id = @id::uuid;

-- name: DNSRecommendationSetState :one
UPDATE dns_recommendations
SET state = @state::text, last_error = sqlc.narg('last_error')::text, job_id = coalesce(sqlc.narg('job_id')::bigint, job_id),
    applied_at = CASE WHEN @state::text = 'applied' THEN now() ELSE applied_at END,
    dismissed_reason = sqlc.narg('dismissed_reason')::text, dismissed_until = sqlc.narg('dismissed_until')::timestamptz,
    dismissed_fingerprint = CASE WHEN @state::text = 'dismissed' THEN fingerprint END,
    updated_at = now()
WHERE id = @id::uuid
RETURNING *;

-- name: DNSRecommendationGetByID :one
SELECT * FROM dns_recommendations WHERE id = @id::uuid;

-- name: DNSRecommendationClear :exec
-- A domain with nothing to recommend: drops what is not being applied.
DELETE FROM dns_recommendations WHERE domain_id = @domain_id::uuid AND state <> 'applying';
