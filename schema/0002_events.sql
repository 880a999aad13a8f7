-- The event log every part of mailwatch writes to. An event whose severity
-- is critical is an alert; its acknowledgement state lives on the row.

CREATE TABLE events (
    id                uuid        PRIMARY KEY, -- UUIDv7: time-ordered
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    event_type        text        NOT NULL,
    severity          text        NOT NULL,
    domain            text,
    tags              text[]      NOT NULL DEFAULT '{}',
    payload           jsonb       NOT NULL,
    -- The event's API representation, written once at emit time (events
    -- are immutable): listings send it without decoding every column.
    rendered          text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    acknowledged_at   timestamptz,
    acknowledged_by   text,
    acknowledged_note text,
    acknowledged_key  text,
    CONSTRAINT events_severity_check CHECK (severity IN ('info', 'warning', 'critical')),
    CONSTRAINT events_ack_only_alerts CHECK (acknowledged_at IS NULL OR severity = 'critical')
);

-- Listing newest-first (or oldest-first) per account, optionally by type:
-- both are index range scans bounded to one account.
CREATE INDEX events_account_created_idx ON events (account_id, created_at, id);
CREATE INDEX events_account_type_created_idx ON events (account_id, event_type, created_at, id);
-- Alerts, and the unacknowledged ones the dashboard counts.
CREATE INDEX events_account_alerts_idx ON events (account_id, created_at, id) WHERE severity = 'critical';
CREATE INDEX events_account_unacked_alerts_idx ON events (account_id, created_at, id)
    WHERE severity = 'critical' AND acknowledged_at IS NULL;
-- Retention deletes by age across accounts.
CREATE INDEX events_created_idx ON events (created_at);
