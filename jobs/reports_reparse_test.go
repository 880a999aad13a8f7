package jobs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// startReportWorkers works the default and maintenance queues on a fresh
// database.
func startReportWorkers(t *testing.T) *workerBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.Default, queues.Maintenance}})
	require.NoError(t, err)
	ch, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	return &workerBundle{pool: pool, client: client, completed: ch}
}

// waitFor returns once query (a count) answers want, checking again after
// each job River finishes.
func (b *workerBundle) waitFor(t *testing.T, want int64, query string, args ...any) {
	t.Helper()
	for {
		var n int64
		require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
		if n == want {
			return
		}
		select {
		case <-b.completed:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: %d, want %d", query, n, want)
		}
	}
}

func insertFailedReport(t *testing.T, db dbutil.Executor, accountID, domainID uuid.UUID, raw []byte) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := db.Exec(context.Background(), `INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw, raw_size, status, reason, parsed_at)
VALUES ($1, $2, $3, 'dmarc', 'smtp', $4, $5, 'failed', 'an older parser could not read it', now())`, id, accountID, domainID, raw, len(raw))
	require.NoError(t, err)
	return id
}

func parseableReport(reportID string) []byte {
	now := time.Now()
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>r.example</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>job-reparse.test</domain><p>none</p></policy_published>
<record><row><source_ip>192.0.2.1</source_ip><count>3</count><policy_evaluated><disposition>none</disposition><dkim>pass</dkim><spf>pass</spf></policy_evaluated></row>
<identifiers><header_from>job-reparse.test</header_from></identifiers></record></feedback>`, reportID, now.Add(-48*time.Hour).Unix(), now.Add(-24*time.Hour).Unix()))
}

// TestReportReparseJob: the reparse-reports task's River job queues a
// report_parse job per failed report with its bytes kept, which a worker
// parses; run again, it queues nothing for reports already parsed, and
// only the one still failing.
func TestReportReparseJob(t *testing.T) {
	t.Parallel()
	b := startReportWorkers(t)
	d := testfactory.AccountDomain(t, b.pool, "job-reparse.test")
	insertFailedReport(t, b.pool, d.AccountID, d.ID, parseableReport("a"))
	insertFailedReport(t, b.pool, d.AccountID, d.ID, parseableReport("b"))
	broken := insertFailedReport(t, b.pool, d.AccountID, d.ID, []byte("<feedback><oops"))

	b.run(t, reports.ReparseArgs{})
	b.waitFor(t, 2, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND status = 'accepted' AND raw IS NULL", d.ID)
	b.waitFor(t, 1, "SELECT count(*) FROM report_messages WHERE id = $1 AND status = 'failed' AND raw IS NOT NULL", broken)
	b.waitFor(t, 3, "SELECT count(*) FROM river_job WHERE kind = 'report_parse' AND state = 'completed'")

	b.run(t, reports.ReparseArgs{})
	b.waitFor(t, 4, "SELECT count(*) FROM river_job WHERE kind = 'report_parse' AND state = 'completed'")
	var outputs []string
	rows, err := b.pool.Query(context.Background(), "SELECT metadata->>'output' FROM river_job WHERE kind = 'report_reparse' ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		outputs = append(outputs, o)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{`{"queued": 3}`, `{"queued": 1}`}, outputs, "the second run queues only the report that still fails")
	b.waitFor(t, 2, "SELECT count(*) FROM dmarc_reports WHERE domain_id = $1", d.ID)
}

// TestReportRawPruneJob: the daily job drops the kept bytes of failed
// reports received more than reports.FailedRawRetention ago.
func TestReportRawPruneJob(t *testing.T) {
	t.Parallel()
	b := startReportWorkers(t)
	d := testfactory.AccountDomain(t, b.pool, "job-raw-prune.test")
	old := insertFailedReport(t, b.pool, d.AccountID, d.ID, []byte("<feedback><oops"))
	recent := insertFailedReport(t, b.pool, d.AccountID, d.ID, []byte("<feedback><oops"))
	_, err := b.pool.Exec(context.Background(), "UPDATE report_messages SET received_at = now() - $2::interval WHERE id = $1",
		old, fmt.Sprintf("%d hours", int(reports.FailedRawRetention.Hours())+1))
	require.NoError(t, err)

	b.run(t, ReportRawPruneArgs{})
	b.waitFor(t, 1, "SELECT count(*) FROM report_messages WHERE id = $1 AND status = 'failed' AND raw IS NULL", old)
	b.waitFor(t, 1, "SELECT count(*) FROM report_messages WHERE id = $1 AND raw IS NOT NULL", recent)
}

// TestReportSummaryJob: a parsed aggregate report queues its domain's
// sources summary, once for a burst; the job stores the summary the reads
// then find current, and a second run finds it so and computes nothing.
func TestReportSummaryJob(t *testing.T) {
	t.Parallel()
	b := startReportWorkers(t)
	d := testfactory.AccountDomain(t, b.pool, "job-reparse.test")
	insertFailedReport(t, b.pool, d.AccountID, d.ID, parseableReport("a"))
	insertFailedReport(t, b.pool, d.AccountID, d.ID, parseableReport("b"))
	b.run(t, reports.ReparseArgs{})
	b.waitFor(t, 2, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND status = 'accepted'", d.ID)
	b.waitFor(t, 1, "SELECT count(*) FROM river_job WHERE kind = 'dmarc_source_summary' AND state = 'scheduled' AND args->>'domain_id' = $1", d.ID.String())
	require.Zero(t, count(t, b, "SELECT count(*) FROM dmarc_source_summaries WHERE domain_id = $1", d.ID))

	// Due now rather than after SummaryDelay.
	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT id FROM river_job WHERE kind = 'dmarc_source_summary'").Scan(&id))
	_, err := b.client.JobRetry(context.Background(), id)
	require.NoError(t, err)
	b.waitFor(t, 1, "SELECT count(*) FROM river_job WHERE kind = 'dmarc_source_summary' AND state = 'completed'")
	require.Equal(t, int64(1), count(t, b, `SELECT count(*) FROM dmarc_source_summaries s JOIN dmarc_source_versions v USING (domain_id)
		WHERE s.domain_id = $1 AND s.kind = 0 AND s.version = v.version AND s.total_messages = 6`, d.ID), "current, both reports summed")
	require.Equal(t, int64(1), count(t, b, "SELECT count(*) FROM dmarc_source_summary_groups WHERE domain_id = $1 AND name = '192.0.2.1'", d.ID))

	b.run(t, reports.SummaryArgs{DomainID: d.ID})
	require.Equal(t, []string{`{"computed": true}`, `{"computed": false}`}, outputs(t, b, "SELECT metadata->>'output' FROM river_job WHERE kind = 'dmarc_source_summary' AND state = 'completed' ORDER BY id"))
}

func count(t *testing.T, b *workerBundle, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func outputs(t *testing.T, b *workerBundle, query string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), query)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}
