-- name: DomainInsert :one
INSERT INTO domains (id, account_id, name, tags)
VALUES (@id::uuid, @account_id::uuid, @name::text, @tags::text[])
RETURNING *;

-- name: DomainGetByName :one
SELECT * FROM domains WHERE account_id = @account_id::uuid AND name = @name::text;

-- name: DomainGetByNameForUpdate :one
SELECT * FROM domains WHERE account_id = @account_id::uuid AND name = @name::text FOR UPDATE;

-- name: DomainGetByIDForUpdate :one
-- Workers lock the row they converge, so a live lookup and a scheduled
-- check of one domain apply one after the other.
SELECT * FROM domains WHERE id = @id::uuid FOR UPDATE;

-- name: DomainGetByID :one
SELECT * FROM domains WHERE id = @id::uuid;

-- name: DomainList :many
-- One page of an account's domains by name, without the large snapshot
-- columns.
SELECT id, account_id, name, tags, dkim_selectors, created_at, updated_at, checked_at, check_status, score, scored_at
FROM domains
WHERE account_id = @account_id::uuid AND name > @after::text
ORDER BY name
LIMIT @max_rows::int;

-- name: DomainUpdate :one
UPDATE domains
SET tags = coalesce(sqlc.narg('tags')::text[], tags),
    dkim_selectors = coalesce(sqlc.narg('dkim_selectors')::text[], dkim_selectors),
    updated_at = now()
WHERE account_id = @account_id::uuid AND name = @name::text
RETURNING *;

-- name: DomainDelete :execrows
DELETE FROM domains WHERE account_id = @account_id::uuid AND name = @name::text;

-- name: DomainStoreCheck :exec
UPDATE domains
SET checked_at = @checked_at::timestamptz,
    results = @results::jsonb,
    check_status = @check_status::jsonb,
    known = @known::jsonb
WHERE id = @id::uuid;

-- name: DomainStoreScore :exec
UPDATE domains
SET score = @score::int, health = @health::jsonb, scored_at = @scored_at::timestamptz
WHERE id = @id::uuid;

-- name: DomainIDsAfter :many
-- The scheduler pages through every domain.
SELECT id FROM domains WHERE id > @after::uuid ORDER BY id LIMIT @max_rows::int;

-- name: DomainLowestScored :many
-- The account's domains by health for the dashboard's overview: the lowest
-- score first, domains never scored after every scored one, then by name.
-- An account's domains are bounded by its plan, so the top-N sort reads the
-- account's rows of (account_id, name) and keeps @max_rows of them.
SELECT name, score, checked_at
FROM domains
WHERE account_id = @account_id::uuid
ORDER BY score ASC NULLS LAST, name
LIMIT @max_rows::int;

-- name: DomainDashboard :one
SELECT count(*) AS total,
       count(score) AS scored,
       coalesce(avg(score), 0)::float8 AS average_score,
       count(*) FILTER (WHERE score < @at_risk_below::int) AS at_risk
FROM domains
WHERE account_id = @account_id::uuid;

-- name: DomainHealthInsert :exec
INSERT INTO domain_health_history (id, domain_id, score, report, computed_at)
VALUES (@id::uuid, @domain_id::uuid, @score::int, @report::jsonb, @computed_at::timestamptz);

-- name: DomainHealthList :many
SELECT score, report, computed_at
FROM domain_health_history
WHERE domain_id = @domain_id::uuid
ORDER BY computed_at DESC, id DESC
LIMIT @max_rows::int;

-- name: DomainHealthPrune :execrows
DELETE FROM domain_health_history WHERE computed_at < @before::timestamptz;

-- name: DomainForgetKnownCheck :exec
-- Drops one check's last known result, so its next answer is learned as a
-- new baseline rather than reported as a change (e.g. after the domain's
-- DKIM selectors changed: the DNS did not).
UPDATE domains SET known = known - @check_name::text WHERE id = @id::uuid AND known IS NOT NULL;
