-- The stored sources summary (0032) kept per-IP sums, and every read named
-- and grouped them again: a reverse DNS lookup and a sender map lookup per
-- IP, up to 5,000 of them, and an answer naming every IP. A read's cost
-- grew with the IPs a domain had seen. The summary now stores the answer
-- itself: one row per source, named and grouped, ranked by volume, with
-- its busiest IPs, and the totals the enforcement readiness needs. A read
-- takes the first rows it lists; the guidance takes the totals and the
-- failing known senders.
--
-- Names are applied when the summary is computed: the parse that stores a
-- report has resolved its IPs before it bumps the domain's version, and a
-- summary older than the age the service allows (an hour) is computed
-- again, which picks up a PTR another domain's report taught later.

-- The stored summaries are a cache: they are computed again on first read.
-- Locked first, so that no summary stored by a server still running the
-- previous version lands between the delete and the new columns.
LOCK TABLE dmarc_source_summaries IN ACCESS EXCLUSIVE MODE;
DELETE FROM dmarc_source_summaries;

ALTER TABLE dmarc_source_summaries
    DROP COLUMN source_ips,
    DROP COLUMN messages,
    DROP COLUMN dkim_aligned,
    DROP COLUMN spf_aligned,
    DROP COLUMN compliant,
    DROP COLUMN forwarded,
    DROP COLUMN failing,
    DROP COLUMN selector_counts,
    DROP COLUMN selectors,
    -- Over every source of the window (not only the ones a read lists).
    ADD COLUMN source_count        integer NOT NULL,
    ADD COLUMN total_messages      bigint  NOT NULL,
    ADD COLUMN legitimate_messages bigint  NOT NULL,
    ADD COLUMN passing_messages    bigint  NOT NULL;

-- One row per source of a summary, rank 0 the most volume.
CREATE TABLE dmarc_source_summary_groups (
    domain_id      uuid     NOT NULL,
    kind           smallint NOT NULL,
    rank           integer  NOT NULL,
    name           text     NOT NULL,
    type           text     NOT NULL,
    known          boolean  NOT NULL,
    base_domain    text     NOT NULL,
    category       text     NOT NULL,
    messages       bigint   NOT NULL,
    compliant      bigint   NOT NULL,
    forwarded      bigint   NOT NULL,
    failing        bigint   NOT NULL,
    dkim_aligned   bigint   NOT NULL,
    spf_aligned    bigint   NOT NULL,
    -- All the source's IPs; ips holds the busiest of them
    -- ([{"ip", "ptr", "messages"}], most volume first).
    ip_count       integer  NOT NULL,
    ips            jsonb    NOT NULL,
    dkim_selectors text[]   NOT NULL,
    PRIMARY KEY (domain_id, kind, rank),
    FOREIGN KEY (domain_id, kind) REFERENCES dmarc_source_summaries (domain_id, kind) ON DELETE CASCADE
);

-- The guidance's fixes: the known senders failing DMARC, without reading
-- the unknown IPs that make up most of a busy domain's sources.
CREATE INDEX dmarc_source_summary_groups_failing_known ON dmarc_source_summary_groups (domain_id, kind, failing DESC, rank)
    WHERE known AND failing > 0;
