-- Email ingress webhook ids, consumed by every answer to a signed request.
-- The `to` parameter is outside the Standard Webhooks signature, so a
-- signed request refused for its recipient could otherwise be replayed
-- with another account's address. The first answer claims the id; any
-- later request with it gets that answer's outcome (a duplicate of the
-- stored message, or a refusal). Rows older than the signature's timestamp
-- tolerance are useless (a replay fails the signature check) and are
-- purged as new ones arrive.
CREATE TABLE ingress_webhook_ids (
    webhook_id  text        PRIMARY KEY,
    -- delivered, unknown_recipient, expired, invalid_recipient, unreadable
    outcome     text        NOT NULL,
    consumed_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ingress_webhook_ids_consumed_idx ON ingress_webhook_ids (consumed_at);
