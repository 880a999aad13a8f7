-- name: SMSNumberInsert :one
INSERT INTO sms_numbers (phone_number) VALUES (@phone_number::text) RETURNING *;

-- name: SMSNumberList :many
SELECT n.phone_number, n.receiver_id, n.claimed_at, n.created_at,
       r.account_id AS holder_account_id, r.expires_at AS holder_expires_at
FROM sms_numbers n
LEFT JOIN receivers r ON r.id = n.receiver_id
ORDER BY n.phone_number;

-- name: SMSNumberGetForUpdate :one
SELECT n.phone_number, n.receiver_id, r.expires_at AS holder_expires_at
FROM sms_numbers n
LEFT JOIN receivers r ON r.id = n.receiver_id
WHERE n.phone_number = @phone_number::text
FOR UPDATE OF n;

-- name: SMSNumberDelete :execrows
DELETE FROM sms_numbers WHERE phone_number = @phone_number::text;

-- name: SMSNumberPickFree :one
-- A number no live receiver holds, least recently claimed first; SKIP LOCKED
-- lets concurrent creations take different numbers without waiting.
SELECT n.phone_number FROM sms_numbers n
WHERE n.receiver_id IS NULL
   OR EXISTS (SELECT 1 FROM receivers r WHERE r.id = n.receiver_id AND r.expires_at <= @now::timestamptz)
ORDER BY n.claimed_at NULLS FIRST, n.phone_number
LIMIT 1
FOR UPDATE OF n SKIP LOCKED;

-- name: SMSNumberAssign :exec
UPDATE sms_numbers SET receiver_id = @receiver_id::uuid, claimed_at = @now::timestamptz
WHERE phone_number = @phone_number::text;

-- name: SMSNumberReleaseExpired :execrows
UPDATE sms_numbers n SET receiver_id = NULL
FROM receivers r
WHERE r.id = n.receiver_id AND r.expires_at <= @now::timestamptz;
