-- Receivers: temporary inboxes (an email address of INBOUND_DOMAIN or a
-- phone number of the operator's SMS pool), their messages and the pool.

CREATE TABLE receivers (
    id          uuid        PRIMARY KEY, -- UUIDv7
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    channel     text        NOT NULL,
    label       text        NOT NULL DEFAULT '',
    -- Email: "<random>@<INBOUND_DOMAIN>" in lower case. SMS: the E.164
    -- number taken from the pool (numbers are reused, so not unique).
    address     text        NOT NULL,
    ttl_seconds integer     NOT NULL,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Set by the expiry job once it has seen the receiver expired and
    -- released its number; the API decides "expired" from expires_at.
    expired_at  timestamptz,
    -- Per-receiver arrival counter. A delivery increments it under the
    -- receiver's row lock and gives the value to its message, so message
    -- order (seq) is commit order: a waiter's `after` cursor can never skip
    -- a message that committed late.
    last_seq    bigint      NOT NULL DEFAULT 0,
    CONSTRAINT receivers_channel_check CHECK (channel IN ('email', 'sms')),
    CONSTRAINT receivers_ttl_check CHECK (ttl_seconds BETWEEN 60 AND 604800),
    CONSTRAINT receivers_label_length CHECK (char_length(label) <= 100)
);

CREATE UNIQUE INDEX receivers_email_address_key ON receivers (address) WHERE channel = 'email';
CREATE INDEX receivers_account_idx ON receivers (account_id, id);
CREATE INDEX receivers_expires_idx ON receivers (expires_at);

-- The operator's pool of SMS numbers. A number is held by at most one
-- receiver; deleting the receiver (or its account) releases it.
CREATE TABLE sms_numbers (
    phone_number text        PRIMARY KEY,
    receiver_id  uuid        REFERENCES receivers (id) ON DELETE SET NULL,
    claimed_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sms_numbers_e164 CHECK (phone_number ~ '^\+[1-9][0-9]{6,14}$')
);

CREATE UNIQUE INDEX sms_numbers_receiver_key ON sms_numbers (receiver_id) WHERE receiver_id IS NOT NULL;

CREATE TABLE receiver_messages (
    id          uuid        PRIMARY KEY, -- UUIDv7
    receiver_id uuid        NOT NULL REFERENCES receivers (id) ON DELETE CASCADE,
    account_id  uuid        NOT NULL,
    seq         bigint      NOT NULL,
    channel     text        NOT NULL,
    -- Envelope sender (MAIL FROM, the SMS From, or the From header for the
    -- webhook); empty for a bounce.
    sender      text        NOT NULL,
    subject     text        NOT NULL DEFAULT '',
    text_body   text        NOT NULL DEFAULT '',
    html_body   text        NOT NULL DEFAULT '',
    -- Everything else the API shows: from, to, cc, recipients, headers,
    -- attachments, links, codes, date, message_id, media.
    parsed      jsonb       NOT NULL,
    -- The message as received (email only).
    raw         bytea,
    size_bytes  integer     NOT NULL,
    -- Standard Webhooks id of an email ingress request, so a replayed or
    -- retried request is not stored twice.
    webhook_id  text,
    received_at timestamptz NOT NULL,
    CONSTRAINT receiver_messages_seq_key UNIQUE (receiver_id, seq)
);

CREATE UNIQUE INDEX receiver_messages_webhook_id_key ON receiver_messages (webhook_id) WHERE webhook_id IS NOT NULL;
CREATE INDEX receiver_messages_account_received_idx ON receiver_messages (account_id, received_at);

-- Waiters (GET .../receivers/{id}/wait) are woken through LISTEN/NOTIFY on
-- one channel; the payload is the receiver id. Triggers make every writer
-- (the SMTP listener, the ingress webhooks, deletes and account deletion's
-- cascade) notify inside its own transaction.
CREATE FUNCTION mailwatch_receiver_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('mailwatch_receivers', OLD.id::text);
    ELSE
        PERFORM pg_notify('mailwatch_receivers', NEW.receiver_id::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER receiver_messages_notify AFTER INSERT ON receiver_messages
    FOR EACH ROW EXECUTE FUNCTION mailwatch_receiver_notify();
CREATE TRIGGER receivers_notify_delete AFTER DELETE ON receivers
    FOR EACH ROW EXECUTE FUNCTION mailwatch_receiver_notify();
