-- Messages received per account, UTC day and channel, for the receivers
-- page's chart. Receivers and their messages are purged a day after they
-- expire, so a count of receiver_messages would forget last week; and it
-- would read one index entry per message. A statement trigger adds each
-- insert's messages here instead, one row per account, day, channel and
-- slot (mailwatch_rollup_slot(), as in 0038: concurrent deliveries of one
-- account on different connections mostly update different rows; readers
-- sum the slots). Deleting messages leaves the counts: they say what
-- arrived. Rows older than receivers.DayRetention are pruned by the
-- receiver expiry job.

-- No message is inserted between the counts of the messages stored now
-- (written below) and the trigger.
LOCK TABLE receiver_messages IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE receiver_message_days (
    account_id uuid     NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day        date     NOT NULL,
    channel    text     NOT NULL,
    slot       smallint NOT NULL,
    messages   bigint   NOT NULL,
    PRIMARY KEY (account_id, day, channel, slot)
);

CREATE INDEX receiver_message_days_day_idx ON receiver_message_days (day);

CREATE FUNCTION receiver_message_days_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receiver_message_days AS t (account_id, day, channel, slot, messages)
    SELECT n.account_id, (n.received_at AT TIME ZONE 'UTC')::date, n.channel, mailwatch_rollup_slot(), count(*)
    FROM new_rows n
    GROUP BY 1, 2, 3
    ORDER BY 1, 2, 3
    ON CONFLICT (account_id, day, channel, slot) DO UPDATE SET messages = t.messages + EXCLUDED.messages;
    RETURN NULL;
END
$$;

CREATE TRIGGER receiver_message_days_add AFTER INSERT ON receiver_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION receiver_message_days_add();

INSERT INTO receiver_message_days (account_id, day, channel, slot, messages)
SELECT m.account_id, (m.received_at AT TIME ZONE 'UTC')::date, m.channel, 0, count(*)
FROM receiver_messages m
WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = m.account_id)
GROUP BY 1, 2, 3;
