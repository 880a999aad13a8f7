-- name: NotificationAddressInsert :one
INSERT INTO notification_addresses (id, account_id, email, login)
VALUES (@id::uuid, @account_id::uuid, @email::text, @login::boolean)
RETURNING *;

-- name: NotificationAddressList :many
SELECT * FROM notification_addresses WHERE account_id = @account_id::uuid ORDER BY created_at, id;

-- name: NotificationAddressGetByID :one
SELECT * FROM notification_addresses WHERE id = @id::uuid;

-- name: NotificationAddressDelete :execrows
DELETE FROM notification_addresses WHERE id = @id::uuid AND account_id = @account_id::uuid;

-- name: NotificationAddressSetToken :one
-- A new verification token for an unverified address (the previous one
-- stops working).
UPDATE notification_addresses
SET token_hash = @token_hash::bytea, token_expires_at = @expires_at::timestamptz,
    verification_sent_at = @now::timestamptz
WHERE id = @id::uuid AND verified_at IS NULL
RETURNING *;

-- name: NotificationAddressVerify :one
-- Single use: the token is cleared as the address is verified.
UPDATE notification_addresses
SET verified_at = @now::timestamptz, token_hash = NULL, token_expires_at = NULL
WHERE token_hash = @token_hash::bytea AND token_expires_at > @now::timestamptz AND verified_at IS NULL
RETURNING *;

-- name: NotificationAddressListVerified :many
SELECT email FROM notification_addresses
WHERE account_id = @account_id::uuid AND verified_at IS NOT NULL
ORDER BY created_at, id;

-- name: NotificationAddressDeleteLogin :execrows
DELETE FROM notification_addresses WHERE account_id = @account_id::uuid AND login;

-- name: NotificationAddressUpsertLogin :one
-- The account's (new) sign-in address, unverified: an existing row for the
-- same address becomes the login row and must be verified again.
INSERT INTO notification_addresses (id, account_id, email, login)
VALUES (@id::uuid, @account_id::uuid, @email::text, true)
ON CONFLICT (account_id, email) DO UPDATE
SET login = true, verified_at = NULL, token_hash = NULL, token_expires_at = NULL, verification_sent_at = NULL
RETURNING *;

-- name: NotificationDigestAccounts :many
-- Accounts with non-critical events in [from, to), a verified address and
-- no digest for the day yet. from and to are whole UTC hours (a day), so
-- the hourly event counters answer exactly, without a day of raw events.
-- A key's count is the sum of its slots (schema/0039): one whose slots
-- cancel out counts no event.
SELECT DISTINCT a.account_id FROM notification_addresses a
WHERE a.verified_at IS NOT NULL
  AND EXISTS (SELECT 1 FROM event_counts_hourly c
              WHERE c.account_id = a.account_id AND c.hour >= @from_at::timestamptz AND c.hour < @to_at::timestamptz
                AND c.severity <> 'critical'
              GROUP BY c.hour, c.event_type, c.severity
              HAVING sum(c.events) <> 0)
  AND NOT EXISTS (SELECT 1 FROM notification_digests d WHERE d.account_id = a.account_id AND d.day = @day::date);

-- name: NotificationDigestEvents :many
SELECT * FROM events
WHERE account_id = @account_id::uuid
  AND created_at >= @from_at::timestamptz AND created_at < @to_at::timestamptz
  AND severity <> 'critical'
ORDER BY created_at, id
LIMIT @max::int;

-- name: NotificationDigestGet :one
SELECT * FROM notification_digests WHERE account_id = @account_id::uuid AND day = @day::date;

-- name: NotificationDigestInsert :exec
INSERT INTO notification_digests (account_id, day, events) VALUES (@account_id::uuid, @day::date, @events::int)
ON CONFLICT DO NOTHING;

-- name: EventGetForNotification :one
SELECT * FROM events WHERE id = @id::uuid;

-- name: NotificationAddressLockAccount :exec
-- Serialises additions of one account's addresses (FOR NO KEY UPDATE:
-- foreign keys of child rows still insert), so that the cap on addresses
-- holds under concurrent requests.
SELECT id FROM accounts WHERE id = @account_id::uuid FOR NO KEY UPDATE;

-- name: NotificationAddressCount :one
SELECT count(*)::int FROM notification_addresses WHERE account_id = @account_id::uuid;

-- name: VerificationRecipientClaim :one
-- Records one verification mail to a recipient unless its cooldown or its
-- daily bound forbids it; no row when refused. A conflicting row is locked
-- even when not updated, so concurrent claims take turns and each sees the
-- previous one's effect.
INSERT INTO verification_recipients AS r (recipient_hash, last_queued_at, day, day_count)
VALUES (@recipient_hash::bytea, @now::timestamptz, @day::date, 1)
ON CONFLICT (recipient_hash) DO UPDATE
SET last_queued_at = excluded.last_queued_at,
    day = excluded.day,
    day_count = CASE WHEN r.day = excluded.day THEN r.day_count + 1 ELSE 1 END
WHERE r.last_queued_at <= @cooldown_start::timestamptz
  AND (r.day <> excluded.day OR r.day_count < @per_day::int)
RETURNING *;

-- name: VerificationRecipientGet :one
SELECT * FROM verification_recipients WHERE recipient_hash = @recipient_hash::bytea;

-- name: VerificationRecipientPrune :execrows
-- Deletes a few rows that no window reads any more, skipping rows another
-- transaction holds.
DELETE FROM verification_recipients
WHERE recipient_hash IN (
    SELECT recipient_hash FROM verification_recipients
    WHERE last_queued_at < @before::timestamptz
    ORDER BY last_queued_at
    LIMIT @max::int
    FOR UPDATE SKIP LOCKED
);
