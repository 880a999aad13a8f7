-- Web dashboard sign-in sessions. The browser holds a random token in an
-- HttpOnly cookie; only its SHA-256 is stored, so a copy of this table signs
-- no one in. The CSRF token is derived from the session token (api/web.go),
-- so it needs no column. Deleting an account ends its sessions.
CREATE TABLE web_sessions (
    id           uuid        PRIMARY KEY, -- UUIDv7
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    token_hash   bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    CONSTRAINT web_sessions_token_hash_key UNIQUE (token_hash)
);

CREATE INDEX web_sessions_account_idx ON web_sessions (account_id);
CREATE INDEX web_sessions_expires_idx ON web_sessions (expires_at);
