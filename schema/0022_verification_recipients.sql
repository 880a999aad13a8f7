-- Verification mail goes to addresses nobody has proven they own, so how
-- often one address receives it is bounded by the recipient, not by the
-- notification_addresses row: deleting and adding the address again, or
-- adding it from another account, does not start a fresh budget.
--
-- One row per recipient, keyed by the SHA-256 of the lower-cased address so
-- that nothing readable outlives the address's removal. A row is claimed
-- in the transaction that queues the mail (internal/notify), so concurrent
-- requests queue one mail at most: the row lock makes them take turns.
-- Rows past any window are pruned a few at a time by later claims.
CREATE TABLE verification_recipients (
    recipient_hash bytea       PRIMARY KEY,
    -- last_queued_at: when the last verification mail to the address was
    -- queued (the cooldown runs from here).
    last_queued_at timestamptz NOT NULL,
    -- day_count mails were queued on the UTC day `day`.
    day            date        NOT NULL,
    day_count      integer     NOT NULL,
    CONSTRAINT verification_recipients_hash_len CHECK (octet_length(recipient_hash) = 32),
    CONSTRAINT verification_recipients_day_count CHECK (day_count > 0)
);
CREATE INDEX verification_recipients_last_queued ON verification_recipients (last_queued_at);
