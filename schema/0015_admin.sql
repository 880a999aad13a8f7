-- Account lifecycle and the admin surface (issue 15, items 5 and 6).
--
-- credentials_changed_at: set by a password change. Data-API tokens (and
-- dashboard sessions) issued before it are refused; API keys are not
-- sessions and stay valid.
-- suspended_at / suspended_reason: set by an admin. A suspended account's
-- keys answer 403 with the reason, its data-API tokens are refused and its
-- webhook pushes wait (the delivery worker snoozes them) until unsuspended.
-- deleted_at: DELETE /api/accounts/me marks the account; from then on its
-- keys are 401 and the account_delete job removes everything it owns in
-- batches, the row last. The row (and so its email) stays until the job
-- has finished: a sign-up with that email is 409 meanwhile.
ALTER TABLE accounts
    ADD COLUMN credentials_changed_at timestamptz,
    ADD COLUMN suspended_at           timestamptz,
    ADD COLUMN suspended_reason       text,
    ADD COLUMN deleted_at             timestamptz,
    ADD CONSTRAINT accounts_suspended_reason_length CHECK (char_length(suspended_reason) <= 500);

-- The admin search (GET /api/admin/accounts?q=) is a bounded ILIKE over
-- accounts: an operator's occasional query, not worth an extension
-- (pg_trgm) every deployment would have to allow.
