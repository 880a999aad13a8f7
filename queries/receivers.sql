-- name: ReceiverInsert :one
INSERT INTO receivers (id, account_id, channel, label, address, ttl_seconds, expires_at, created_at)
VALUES (@id::uuid, @account_id::uuid, @channel::text, @label::text, @address::text, @ttl_seconds::integer,
        @expires_at::timestamptz, @created_at::timestamptz)
RETURNING *;

-- name: ReceiverGetForAccount :one
SELECT * FROM receivers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ReceiverListByAccount :many
-- Newest first; @before is the keyset cursor (the last id of the previous page).
SELECT * FROM receivers
WHERE account_id = @account_id::uuid
  AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
ORDER BY id DESC
LIMIT @max::integer;

-- name: ReceiverDeleteForAccount :execrows
-- ON DELETE SET NULL releases its SMS number; the trigger wakes its waiters.
DELETE FROM receivers WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: ReceiverGetEmailByAddress :one
SELECT * FROM receivers WHERE channel = 'email' AND address = lower(@address::text);

-- name: ReceiverGetBySMSNumber :one
SELECT r.* FROM sms_numbers n JOIN receivers r ON r.id = n.receiver_id
WHERE n.phone_number = @phone_number::text;

-- name: ReceiverNextSeq :one
-- Locks the receiver until the delivering transaction ends, so seq order is
-- commit order. Returns no row when the receiver is gone or expired.
UPDATE receivers SET last_seq = last_seq + 1
WHERE id = @id::uuid AND expires_at > @now::timestamptz
RETURNING last_seq, account_id, channel, label;

-- name: ReceiverCountActive :one
SELECT count(*) FROM receivers WHERE account_id = @account_id::uuid AND expires_at > @now::timestamptz;

-- name: ReceiverMarkExpired :execrows
UPDATE receivers SET expired_at = @now::timestamptz
WHERE expired_at IS NULL AND expires_at <= @now::timestamptz;

-- name: ReceiverPurgeExpired :execrows
-- Deletes (with their messages) up to @max receivers expired before @cutoff.
DELETE FROM receivers WHERE id IN (
    SELECT id FROM receivers WHERE expires_at < @cutoff::timestamptz ORDER BY expires_at LIMIT @max::integer
);

-- name: ReceiverListForWait :many
-- The account's receivers among @ids, for a matching wait's re-check: a
-- missing one was deleted.
SELECT id, expires_at, last_seq FROM receivers
WHERE account_id = @account_id::uuid AND id = ANY(@ids::uuid[]);

-- name: ReceiverListLiveByLabel :many
-- The account's live receivers with a label, oldest first; @max bounds a
-- label-wide wait.
SELECT id, expires_at, last_seq FROM receivers
WHERE account_id = @account_id::uuid AND label = @label::text AND expires_at > @now::timestamptz
ORDER BY id
LIMIT @max::integer;

-- name: ReceiverMessageDays :many
-- Messages received by the account's receivers per UTC day and channel from
-- @since to @until (inclusive), the slots summed, oldest first.
SELECT day, channel, sum(messages)::bigint AS messages
FROM receiver_message_days
WHERE account_id = @account_id::uuid AND day >= @since::date AND day <= @until::date
GROUP BY day, channel
ORDER BY day, channel;

-- name: ReceiverMessageDaysPrune :execrows
-- Deletes up to @max daily counts of days before @before.
DELETE FROM receiver_message_days WHERE ctid IN (
    SELECT ctid FROM receiver_message_days WHERE day < @before::date LIMIT @max::integer
);
