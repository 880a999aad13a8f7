-- name: IngressWebhookIDClaim :one
-- Claims a webhook id for an outcome; no row when it was claimed before.
INSERT INTO ingress_webhook_ids (webhook_id, outcome, consumed_at)
VALUES (@webhook_id::text, @outcome::text, @consumed_at::timestamptz)
ON CONFLICT (webhook_id) DO NOTHING
RETURNING webhook_id;

-- name: IngressWebhookIDGet :one
SELECT outcome FROM ingress_webhook_ids WHERE webhook_id = @webhook_id::text;

-- name: IngressWebhookIDPurge :exec
DELETE FROM ingress_webhook_ids WHERE consumed_at < @before::timestamptz;

-- name: IngressWebhookIDClaimKept :one
-- Claims a webhook id for good: consumed_at 'infinity' keeps it out of
-- IngressWebhookIDPurge (and out of that index range). For signatures that
-- carry no timestamp (Twilio's), where a capture verifies forever. No row
-- when it was claimed before.
INSERT INTO ingress_webhook_ids (webhook_id, outcome, consumed_at)
VALUES (@webhook_id::text, @outcome::text, 'infinity')
ON CONFLICT (webhook_id) DO NOTHING
RETURNING webhook_id;
