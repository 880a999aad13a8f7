package reports_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// validReport is an aggregate report for example.com that today's parser
// accepts.
func validReport(t *testing.T, now time.Time, reportID string) []byte {
	t.Helper()
	return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>r.example</org_name><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>
<record><row><source_ip>192.0.2.1</source_ip><count>3</count><policy_evaluated><disposition>none</disposition><dkim>pass</dkim><spf>pass</spf></policy_evaluated></row>
<identifiers><header_from>example.com</header_from></identifiers></record></feedback>`, reportID, now.Add(-48*time.Hour).Unix(), now.Add(-24*time.Hour).Unix()))
}

// insertFailed stores a report as an earlier release left it: failed with
// a reason, its raw bytes kept.
func (b *testBundle) insertFailed(t *testing.T, domainID uuid.UUID, raw []byte, rawSize int) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := b.tx.Exec(context.Background(), `INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw, raw_size, status, reason, parsed_at)
VALUES ($1, $2, $3, 'dmarc', 'smtp', $4, $5, 'failed', 'malformed XML: an older parser could not read it', now())`,
		id, b.account, domainID, raw, rawSize)
	require.NoError(t, err)
	return id
}

// TestFailedReportKeepsRaw: a report the parser fails on keeps its raw
// bytes (it was acknowledged, its sender will not send it again), within
// MaxFailedRawBytesPerDomain; every other outcome drops them.
func TestFailedReportKeepsRaw(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")

	out := b.receive(t, d, reports.KindDMARC, []byte("<feedback><oops"))
	require.Equal(t, reports.StatusFailed, out.Status)
	require.True(t, out.RawKept)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND status = 'failed' AND raw = '<feedback><oops'", d))
	row, err := dbsqlc.New().ReportMessageGet(context.Background(), b.tx, dbsqlc.ReportMessageGetParams{ID: b.lastMessage(t, d), DomainID: d})
	require.NoError(t, err)
	require.True(t, row.RawKept)

	out = b.receive(t, d, reports.KindDMARC, validReport(t, b.svc.Now(), "ok-1"))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.False(t, out.RawKept)
	out = b.receive(t, d, reports.KindDMARC, corpus.Read(t, "dmarc/twilight.eml"))
	require.Equal(t, reports.StatusRefused, out.Status)
	require.False(t, out.RawKept, "a refusal is a decision, not a parser's failure")

	// The domain's kept bytes are bounded: past the bound a failure drops
	// its bytes as before.
	full := b.domain(t, "full.example.com")
	kept := reports.MaxFailedRawBytesPerDomain/reports.MaxRawBytes + 1
	for range kept {
		b.insertFailed(t, full, []byte("x"), reports.MaxRawBytes)
	}
	out = b.receive(t, full, reports.KindDMARC, []byte("<feedback><oops"))
	require.Equal(t, reports.StatusFailed, out.Status)
	require.False(t, out.RawKept)
	require.Equal(t, int64(kept), b.count(t, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND raw IS NOT NULL", full))
}

func (b *testBundle) lastMessage(t *testing.T, domainID uuid.UUID) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.tx.QueryRow(context.Background(), "SELECT id FROM report_messages WHERE domain_id = $1 ORDER BY id DESC LIMIT 1", domainID).Scan(&id))
	return id
}

// requeueAll runs Requeue to the end of its walk, as the reparse-reports
// task does, and returns how many reports it queued.
func (b *testBundle) requeueAll(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	var cursor reports.RequeueCursor
	total := 0
	for {
		var n int
		require.NoError(t, pgx.BeginFunc(ctx, b.tx, func(tx pgx.Tx) error {
			var err error
			n, cursor, err = b.svc.Requeue(ctx, tx, cursor, 2)
			return err
		}))
		if n == 0 {
			return total
		}
		total += n
	}
}

// TestRequeueParsesFailedReportsAgain: after an upgrade whose parser reads
// them, failed reports with their raw bytes kept go back to pending with a
// parse job each, and parse; a report still unreadable fails again and
// keeps its bytes; running it again queues only what still failed.
func TestRequeueParsesFailedReportsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.domain(t, "example.com")
	other := b.domain(t, "example.org")
	fixed := []uuid.UUID{
		b.insertFailed(t, d, validReport(t, b.svc.Now(), "fixed-1"), 100),
		b.insertFailed(t, d, validReport(t, b.svc.Now(), "fixed-2"), 100),
		b.insertFailed(t, d, validReport(t, b.svc.Now(), "fixed-3"), 100),
	}
	broken := b.insertFailed(t, other, []byte("<feedback><oops"), 15)
	gone := b.insertFailed(t, d, []byte("<feedback><oops"), 15)
	_, err := b.tx.Exec(ctx, "UPDATE report_messages SET raw = NULL WHERE id = $1", gone)
	require.NoError(t, err)

	require.Equal(t, 4, b.requeueAll(t), "every failed report with its bytes, once, over batches of 2")
	require.Equal(t, int64(4), b.count(t, "SELECT count(*) FROM report_messages WHERE account_id = $1 AND status = 'pending'", b.account))
	require.Equal(t, int64(4), b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'report_parse'
		AND (args->>'message_id')::uuid IN (SELECT id FROM report_messages WHERE account_id = $1)`, b.account))
	require.Equal(t, 0, b.requeueAll(t), "nothing is failed while its parse is queued")

	for _, id := range append(fixed, broken) {
		_, err := b.svc.Parse(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, int64(3), b.count(t, "SELECT count(*) FROM dmarc_reports WHERE domain_id = $1", d))
	require.Equal(t, int64(0), b.count(t, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND raw IS NOT NULL", d),
		"a parsed report drops its bytes")
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE id = $1 AND status = 'failed' AND raw IS NOT NULL", broken))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE id = $1 AND status = 'failed' AND raw IS NULL", gone),
		"a failed report whose bytes were pruned stays as it is")

	require.Equal(t, 1, b.requeueAll(t), "a second run queues only the report that still fails")
	_, err = b.svc.Parse(ctx, broken)
	require.NoError(t, err)
	require.Equal(t, int64(3), b.count(t, "SELECT count(*) FROM dmarc_reports WHERE domain_id = $1", d), "nothing parsed twice")
}

// TestPruneFailedRaw: the kept bytes of failed reports received before the
// cutoff are dropped, the reports themselves stay.
func TestPruneFailedRaw(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.domain(t, "example.com")
	old := b.insertFailed(t, d, []byte("<feedback><oops"), 15)
	recent := b.insertFailed(t, d, []byte("<feedback><oops"), 15)
	_, err := b.tx.Exec(ctx, "UPDATE report_messages SET received_at = $2 WHERE id = $1", old, b.svc.Now().Add(-reports.FailedRawRetention-time.Hour))
	require.NoError(t, err)
	_, err = b.tx.Exec(ctx, "UPDATE report_messages SET received_at = $2 WHERE id = $1", recent, b.svc.Now().Add(-reports.FailedRawRetention+time.Hour))
	require.NoError(t, err)

	n, err := reports.PruneFailedRaw(ctx, b.tx, b.svc.Now().Add(-reports.FailedRawRetention), 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE id = $1 AND status = 'failed' AND raw IS NULL", old))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE id = $1 AND raw IS NOT NULL", recent))
}
