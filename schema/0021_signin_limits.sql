-- Failed password checks per account, shared by every route that checks a
-- password (internal/signin): the dashboard's sign-in form and the password
-- grant of POST /api/auth/token. An account has one row for the clients it
-- does not know (device_hash empty) and one per known device: a browser that
-- gave the account's right password within the last 30 days, named by the
-- SHA-256 of the random token in its mw_device cookie. Each row is its own
-- failure budget, so guessing from unknown clients never holds the owner's
-- own browser out. At most 20 device rows per account (adding one drops the
-- oldest), so the table is bounded by the number of accounts; deleting an
-- account deletes its rows.
CREATE TABLE signin_limits (
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    device_hash     bytea       NOT NULL,
    -- Consecutive failures, counted before each check is made (a check in
    -- flight counts), forgotten 24 hours after the last one.
    failures        integer     NOT NULL DEFAULT 0,
    last_failure_at timestamptz,
    -- No check is made for this row's clients before this time.
    blocked_until   timestamptz,
    -- A device's last right password; null for the unknown clients' row.
    last_success_at timestamptz,
    PRIMARY KEY (account_id, device_hash),
    CONSTRAINT signin_limits_failures_check CHECK (failures >= 0),
    CONSTRAINT signin_limits_device_hash_check CHECK (octet_length(device_hash) IN (0, 32))
);
