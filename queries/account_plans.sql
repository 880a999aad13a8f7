-- name: AccountPlanLock :one
-- Locks the account row (FOR NO KEY UPDATE: child rows' foreign keys still
-- insert) so that two creates of one account count one after the other,
-- and returns the plan stored for it (NULL: the default plan).
SELECT a.id, p.plan
FROM accounts a
LEFT JOIN account_plans p ON p.account_id = a.id
WHERE a.id = @account_id::uuid
FOR NO KEY UPDATE OF a;

-- name: AccountPlanGet :one
SELECT a.id AS account_id,
       p.plan,
       coalesce(p.billing_status, 'active')::text AS billing_status,
       p.grace_until,
       p.stripe_customer_id,
       p.invoice_event_at,
       p.updated_at
FROM accounts a
LEFT JOIN account_plans p ON p.account_id = a.id
WHERE a.id = @account_id::uuid;

-- name: AccountPlanEnsure :exec
INSERT INTO account_plans (account_id) VALUES (@account_id::uuid)
ON CONFLICT (account_id) DO NOTHING;

-- name: AccountPlanGetForUpdate :one
-- The row must exist (AccountPlanEnsure first).
SELECT * FROM account_plans WHERE account_id = @account_id::uuid FOR UPDATE;

-- name: AccountPlanGetByCustomer :one
SELECT * FROM account_plans WHERE stripe_customer_id = @customer_id::text FOR UPDATE;

-- name: AccountPlanSetPlan :exec
-- A NULL plan puts the account back on the default plan.
UPDATE account_plans SET plan = sqlc.narg('plan')::text, updated_at = now()
WHERE account_id = @account_id::uuid;

-- name: AccountPlanSetCustomer :exec
UPDATE account_plans SET stripe_customer_id = @customer_id::text, updated_at = now()
WHERE account_id = @account_id::uuid;

-- name: AccountPlanSetBilling :exec
UPDATE account_plans
SET billing_status = @billing_status::text,
    grace_until = sqlc.narg('grace_until')::timestamptz,
    invoice_event_at = sqlc.narg('invoice_event_at')::timestamptz,
    updated_at = now()
WHERE account_id = @account_id::uuid;

-- name: AccountPlanGraceExpired :many
-- Past-due accounts whose grace period ended and which still hold a plan
-- of their own; SKIP LOCKED lets a Stripe event in flight finish first.
SELECT * FROM account_plans
WHERE billing_status = 'past_due' AND grace_until <= @now::timestamptz AND plan IS NOT NULL
ORDER BY grace_until
LIMIT @max::int
FOR UPDATE SKIP LOCKED;

-- name: AccountUsageCounts :one
SELECT
    (SELECT count(*) FROM domains d WHERE d.account_id = @account_id::uuid)::bigint AS domains,
    (SELECT count(*) FROM receivers r WHERE r.account_id = @account_id::uuid AND r.expires_at > @now::timestamptz)::bigint AS receivers,
    (SELECT count(*) FROM event_subscriptions s WHERE s.account_id = @account_id::uuid)::bigint AS subscriptions,
    (SELECT count(*) FROM sending_providers p WHERE p.account_id = @account_id::uuid)::bigint AS providers;
