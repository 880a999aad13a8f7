-- name: DMARCReporterSeen :one
-- Records a report of reporter for the domain received at seen_at: its day
-- added to recent_days (the last 14 kept), the stop cleared. A reporter
-- new to a domain that has max_reporters already is not recorded (no
-- row). Returns when it had stopped (null: it had not, or is new).
INSERT INTO dmarc_reporters AS r (domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports)
SELECT @domain_id::uuid, @reporter::text, @seen_at::timestamptz, @seen_at::timestamptz, '{}'::date[] || @seen_day::date, 1
WHERE (SELECT count(*) FROM dmarc_reporters c WHERE c.domain_id = @domain_id::uuid) < @max_reporters::int
   OR EXISTS (SELECT 1 FROM dmarc_reporters e WHERE e.domain_id = @domain_id::uuid AND e.reporter = @reporter::text)
ON CONFLICT (domain_id, reporter) DO UPDATE
SET last_seen_at = greatest(r.last_seen_at, EXCLUDED.last_seen_at),
    recent_days = (SELECT coalesce(array_agg(d ORDER BY d), '{}') FROM (
        SELECT DISTINCT d FROM unnest(r.recent_days || EXCLUDED.recent_days) AS d ORDER BY d DESC LIMIT 14) x),
    reports = r.reports + 1,
    stopped_at = NULL
RETURNING (SELECT o.stopped_at FROM dmarc_reporters o WHERE o.domain_id = r.domain_id AND o.reporter = r.reporter) AS previous_stopped_at;

-- name: DMARCReportersSilent :many
-- Reporters not stopped whose last report came between @since and @before
-- and that reported on at least @min_days of the 7 UTC days up to their
-- last, the oldest first, locked for this run: dmarc_reports_stopped is
-- due for them.
SELECT r.domain_id, r.reporter, r.last_seen_at, r.recent_days, d.account_id, d.name AS domain_name, d.tags AS domain_tags
FROM dmarc_reporters r
JOIN domains d ON d.id = r.domain_id
WHERE r.stopped_at IS NULL AND r.last_seen_at < @before::timestamptz AND r.last_seen_at >= @since::timestamptz
  AND (SELECT count(*) FROM unnest(r.recent_days) AS x(day) WHERE x.day > r.recent_days[cardinality(r.recent_days)] - 7) >= @min_days::int
ORDER BY r.last_seen_at, r.domain_id, r.reporter
LIMIT @max_rows::int
FOR UPDATE OF r SKIP LOCKED;

-- name: DMARCReporterStop :exec
UPDATE dmarc_reporters SET stopped_at = @seen_at::timestamptz WHERE domain_id = @domain_id::uuid AND reporter = @reporter::text;

-- name: DMARCReporterList :many
-- The domain's reporters, most recently seen first.
SELECT reporter, first_seen_at, last_seen_at, recent_days, reports, stopped_at FROM dmarc_reporters
WHERE domain_id = @domain_id::uuid
ORDER BY last_seen_at DESC, reporter;

-- name: DMARCFailureNotice :one
-- Takes the domain's failure-report rate limit at seen_at: the event is
-- raised (emitted_at = seen_at, and previous_suppressed the reports
-- suppressed since the last one, then reset) when none was raised since
-- cutoff; otherwise the report is counted as suppressed.
WITH prev AS (
    SELECT suppressed FROM dmarc_failure_notices WHERE domain_id = @domain_id::uuid
)
INSERT INTO dmarc_failure_notices AS f (domain_id, last_emitted_at, suppressed)
VALUES (@domain_id::uuid, @seen_at::timestamptz, 0)
ON CONFLICT (domain_id) DO UPDATE
SET last_emitted_at = CASE WHEN f.last_emitted_at <= @cutoff::timestamptz THEN EXCLUDED.last_emitted_at ELSE f.last_emitted_at END,
    suppressed = CASE WHEN f.last_emitted_at <= @cutoff::timestamptz THEN 0 ELSE f.suppressed + 1 END
RETURNING f.last_emitted_at AS emitted_at, coalesce((SELECT suppressed FROM prev), 0)::int AS previous_suppressed;
