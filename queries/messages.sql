-- name: MessageInsert :one
INSERT INTO receiver_messages (id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body,
                               parsed, raw, size_bytes, webhook_id, received_at,
                               smtp_client_ip, smtp_helo, smtp_mail_from, smtp_tls_version, smtp_tls_cipher)
VALUES (@id::uuid, @receiver_id::uuid, @account_id::uuid, @seq::bigint, @channel::text, @sender::text,
        @subject::text, @text_body::text, @html_body::text, @parsed::jsonb, sqlc.narg('raw')::bytea,
        @size_bytes::integer, sqlc.narg('webhook_id')::text, @received_at::timestamptz,
        sqlc.narg('smtp_client_ip')::inet, sqlc.narg('smtp_helo')::text, sqlc.narg('smtp_mail_from')::text,
        sqlc.narg('smtp_tls_version')::text, sqlc.narg('smtp_tls_cipher')::text)
RETURNING id;

-- name: MessageSMTPSession :one
-- The raw message and the SMTP session it arrived in, for its analysis.
SELECT raw, smtp_client_ip, smtp_helo, smtp_mail_from, smtp_tls_version, smtp_tls_cipher
FROM receiver_messages WHERE id = @id::uuid;

-- name: MessageGetByWebhookID :one
SELECT id, receiver_id, account_id FROM receiver_messages WHERE webhook_id = @webhook_id::text;

-- name: MessageGet :one
SELECT id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body, parsed, size_bytes, received_at
FROM receiver_messages
WHERE id = @id::uuid AND receiver_id = @receiver_id::uuid AND account_id = @account_id::uuid;

-- name: MessageGetRaw :one
SELECT raw FROM receiver_messages
WHERE id = @id::uuid AND receiver_id = @receiver_id::uuid AND account_id = @account_id::uuid;

-- name: MessageGetSeq :one
SELECT seq FROM receiver_messages WHERE id = @id::uuid AND receiver_id = @receiver_id::uuid;

-- name: MessageListDesc :many
SELECT id, receiver_id, seq, channel, sender, subject, parsed, size_bytes, received_at
FROM receiver_messages
WHERE receiver_id = @receiver_id::uuid AND seq < @before_seq::bigint
ORDER BY seq DESC
LIMIT @max::integer;

-- name: MessageListAsc :many
SELECT id, receiver_id, seq, channel, sender, subject, parsed, size_bytes, received_at
FROM receiver_messages
WHERE receiver_id = @receiver_id::uuid AND seq > @after_seq::bigint
ORDER BY seq
LIMIT @max::integer;

-- name: MessageNextForWait :one
-- The oldest message after @after_seq of a receiver of the account, with the
-- receiver's expiry: one round trip for a waiter's common case.
SELECT r.expires_at, m.id, m.receiver_id, m.account_id, m.seq, m.channel, m.sender, m.subject, m.text_body,
       m.html_body, m.parsed, m.size_bytes, m.received_at
FROM receivers r
JOIN receiver_messages m ON m.receiver_id = r.id
WHERE r.id = @receiver_id::uuid AND r.account_id = @account_id::uuid AND m.seq > @after_seq::bigint
ORDER BY m.seq
LIMIT 1;

-- name: MessageDelete :execrows
DELETE FROM receiver_messages
WHERE id = @id::uuid AND receiver_id = @receiver_id::uuid AND account_id = @account_id::uuid;

-- name: MessageCountSince :one
SELECT count(*) FROM receiver_messages WHERE account_id = @account_id::uuid AND received_at > @since::timestamptz;

-- name: MessageAnalysisSet :one
-- Stores a message's analysis, once: a message already analysed (a retry
-- of a job whose commit landed) is not updated, and no row comes back.
-- Notifies the receiver's waiters (the assertions waiting for a pending
-- analysis) when the transaction commits.
WITH stored AS (
    UPDATE receiver_messages SET analysis = @analysis::jsonb, analyzed_at = @analyzed_at::timestamptz
    WHERE id = @id::uuid AND analyzed_at IS NULL
    RETURNING receiver_id, account_id
)
SELECT receiver_id, account_id, pg_notify('mailwatch_receivers', receiver_id::text)::text AS notified FROM stored;

-- name: MessageAnalysisGet :one
SELECT analysis, analyzed_at FROM receiver_messages WHERE id = @id::uuid;

-- name: MessageListForMatch :many
-- A matching wait's next messages: those after each receiver's cursor
-- (@receiver_ids[i] after @after_seqs[i]; receivers the caller read as the
-- account's), in arrival order per receiver, each receiver's read on
-- receiver_messages_seq_key. The bodies are cut to @body_chars characters;
-- the answer reads the matches that were cut whole with MessageGet.
SELECT m.id, m.receiver_id, m.account_id, m.seq, m.channel, m.sender, m.subject,
       left(m.text_body, @body_chars::integer)::text AS text_body,
       left(m.html_body, @body_chars::integer)::text AS html_body,
       m.parsed, m.size_bytes, m.received_at,
       (char_length(m.text_body) > @body_chars::integer OR char_length(m.html_body) > @body_chars::integer)::boolean AS cut
FROM (SELECT unnest(@receiver_ids::uuid[]) AS receiver_id, unnest(@after_seqs::bigint[]) AS after_seq) c
CROSS JOIN LATERAL (
    SELECT * FROM receiver_messages rm
    WHERE rm.receiver_id = c.receiver_id AND rm.seq > c.after_seq
    ORDER BY rm.seq
    LIMIT @max::integer
) m
ORDER BY m.receiver_id, m.seq
LIMIT @max::integer;

-- name: MessageAnalysisForAccount :one
-- A message's analysis as the API shows it: has_session is false for a
-- message that did not come over SMTP (it is never analysed).
SELECT analysis, analyzed_at, channel, (smtp_helo IS NOT NULL OR smtp_client_ip IS NOT NULL)::boolean AS has_session
FROM receiver_messages
WHERE id = @id::uuid AND receiver_id = @receiver_id::uuid AND account_id = @account_id::uuid;

-- name: MessageAnalysisSummaries :many
-- The grade, score and verdicts of some messages of a receiver, for
-- listings (the sections stay in the database).
SELECT id, channel, (smtp_helo IS NOT NULL OR smtp_client_ip IS NOT NULL)::boolean AS has_session, analyzed_at,
       jsonb_build_object('grade', analysis->'grade', 'score', analysis->'score',
                          'verdicts', analysis->'verdicts')::jsonb AS summary
FROM receiver_messages
WHERE receiver_id = @receiver_id::uuid AND id = ANY(@ids::uuid[]);
