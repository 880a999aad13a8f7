-- name: StripeSubscriptionUpsert :execrows
-- Stores a subscription's state unless a newer event's state is already
-- stored (0 rows: the event is older and changes nothing). Ties (one
-- second) go to the later arrival.
INSERT INTO stripe_subscriptions (id, account_id, customer_id, status, price_id, plan, event_id, event_created)
VALUES (@id::text, @account_id::uuid, @customer_id::text, @status::text, sqlc.narg('price_id')::text, @plan::text,
        @event_id::text, @event_created::timestamptz)
ON CONFLICT (id) DO UPDATE
SET customer_id = excluded.customer_id, status = excluded.status, price_id = excluded.price_id,
    plan = excluded.plan, event_id = excluded.event_id, event_created = excluded.event_created, updated_at = now()
WHERE stripe_subscriptions.event_created <= excluded.event_created
  AND stripe_subscriptions.account_id = excluded.account_id;

-- name: StripeSubscriptionListByAccount :many
SELECT * FROM stripe_subscriptions WHERE account_id = @account_id::uuid ORDER BY event_created DESC, id;
