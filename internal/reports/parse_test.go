package reports_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/jobs"
)

type testBundle struct {
	tx      pgx.Tx
	svc     *reports.Service
	account uuid.UUID
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	tx := dbtest.Tx(t)
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	account := uuid.Must(uuid.NewV7())
	_, err = dbsqlc.New().AccountInsert(context.Background(), tx, dbsqlc.AccountInsertParams{
		ID: account, Email: account.String() + "@example.com", PasswordHash: "x",
	})
	require.NoError(t, err)
	return &testBundle{
		tx: tx, account: account,
		svc: &reports.Service{
			DB: tx, River: client, Emitter: &events.Emitter{River: client},
			Signer: &reports.Signer{Keyring: ring(t, key(1)), Domain: "inbound.mailwatch.test"},
			Now:    func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
		},
	}
}

func (b *testBundle) domain(t *testing.T, name string) uuid.UUID {
	t.Helper()
	d, err := dbsqlc.New().DomainInsert(context.Background(), b.tx, dbsqlc.DomainInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: b.account, Name: name, Tags: []string{"prod"},
	})
	require.NoError(t, err)
	return d.ID
}

// receive stores raw for the domain and parses it, as the SMTP listener
// and the parse job do.
func (b *testBundle) receive(t *testing.T, domainID uuid.UUID, kind reports.Kind, raw []byte) reports.Outcome {
	t.Helper()
	ctx := context.Background()
	var rec reports.Received
	require.NoError(t, pgx.BeginFunc(ctx, b.tx, func(tx pgx.Tx) error {
		var err error
		rec, err = b.svc.Receive(ctx, tx, reports.Incoming{AccountID: b.account, DomainID: domainID, Kind: kind, Source: reports.SourceUpload, Raw: raw})
		return err
	}))
	out, err := b.svc.Parse(ctx, rec.MessageID)
	require.NoError(t, err)
	again, err := b.svc.Parse(ctx, rec.MessageID)
	require.NoError(t, err)
	require.True(t, again.Already, "a second run changes nothing")
	require.Equal(t, out.Status, again.Status)
	return out
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.tx.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestParseAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")

	out := b.receive(t, d, reports.KindDMARC, corpus.Read(t, "dmarc/twilight.eml"))
	require.Equal(t, reports.StatusRefused, out.Status, "twilight.eml reports for twlnet.com")
	require.Contains(t, out.Reason, "not example.com")

	other := b.domain(t, "example.org")
	out = b.receive(t, other, reports.KindDMARC, corpus.Read(t, "dmarc/!large-example.com!1711897200!1711983600.xml"))
	require.Equal(t, reports.StatusRefused, out.Status, "the report is for example.com")

	large := d
	out = b.receive(t, large, reports.KindDMARC, corpus.Read(t, "dmarc/!large-example.com!1711897200!1711983600.xml"))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, int64(2286), b.count(t, "SELECT count(*) FROM dmarc_records WHERE report_id = $1", out.ReportID))
	require.Equal(t, b.count(t, "SELECT message_count FROM dmarc_reports WHERE id = $1", out.ReportID),
		b.count(t, "SELECT sum(count) FROM dmarc_records WHERE report_id = $1", out.ReportID))
	require.Equal(t, b.count(t, "SELECT message_count FROM dmarc_reports WHERE id = $1", out.ReportID),
		b.count(t, "SELECT sum(messages) FROM dmarc_source_days WHERE domain_id = $1", large))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'dmarc_report_received'", b.account))

	// The same report again is acknowledged and ignored.
	dup := b.receive(t, large, reports.KindDMARC, corpus.Read(t, "dmarc/!large-example.com!1711897200!1711983600.xml"))
	require.Equal(t, reports.StatusDuplicate, dup.Status)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM dmarc_reports WHERE domain_id = $1", large))

	// Raw bytes are dropped once parsed.
	require.Equal(t, int64(0), b.count(t, "SELECT count(*) FROM report_messages WHERE account_id = $1 AND raw IS NOT NULL", b.account))
}

func TestParseSplitsLongRanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	// 1574955300..1575304683 spans four days (Nov 28 to Dec 2, 2019).
	out := b.receive(t, d, reports.KindDMARC, corpus.Read(t, "dmarc/aggregate_invalid/report_with_upper_cased_pass.xml"))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, int64(5), b.count(t, "SELECT count(DISTINCT day) FROM dmarc_source_days WHERE domain_id = $1", d))
	require.Equal(t, b.count(t, "SELECT message_count FROM dmarc_reports WHERE id = $1", out.ReportID),
		b.count(t, "SELECT sum(messages) FROM dmarc_source_days WHERE domain_id = $1", d))
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	report := func(begin, end int64) []byte {
		return []byte(fmt.Sprintf(`<feedback><report_metadata><org_name>r.example</org_name><report_id>%d-%d</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>mail.example.com</domain><p>none</p></policy_published>
<record><row><source_ip>192.0.2.1</source_ip><count>3</count><policy_evaluated><disposition>none</disposition><dkim>pass</dkim><spf>pass</spf></policy_evaluated></row>
<identifiers><header_from>mail.example.com</header_from></identifiers></record></feedback>`, begin, end, begin, end))
	}
	now := b.svc.Now().Unix()

	out := b.receive(t, d, reports.KindDMARC, report(now-86400, now))
	require.Equal(t, reports.StatusAccepted, out.Status, "a subdomain's report is the domain's")

	out = b.receive(t, d, reports.KindDMARC, report(now, now+3*86400))
	require.Equal(t, reports.StatusRefused, out.Status)
	require.Contains(t, out.Reason, "future")

	out = b.receive(t, d, reports.KindDMARC, report(now-90*86400, now-86400))
	require.Equal(t, reports.StatusRefused, out.Status)
	require.Contains(t, out.Reason, "spans")

	out = b.receive(t, d, reports.KindDMARC, report(now, now-86400))
	require.Equal(t, reports.StatusRefused, out.Status)
	require.Contains(t, out.Reason, "before it begins")

	err := pgx.BeginFunc(context.Background(), b.tx, func(tx pgx.Tx) error {
		_, err := b.svc.Receive(context.Background(), tx, reports.Incoming{AccountID: b.account, DomainID: d, Kind: reports.KindDMARC, Source: reports.SourceUpload})
		return err
	})
	require.ErrorIs(t, err, reports.ErrEmpty)
}

func TestParseFailureAndTLS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")

	out := b.receive(t, d, reports.KindDMARC, corpus.Read(t, "dmarc-forensic/dmarc_ruf_report_linkedin.eml"))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, reports.TypeFailure, out.ReportType)
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM report_messages WHERE domain_id = $1 AND failure->>'source_ip' = '10.10.10.10'", d))

	out = b.receive(t, d, reports.KindDMARC, []byte("<feedback><oops"))
	require.Equal(t, reports.StatusFailed, out.Status)
	require.NotEmpty(t, out.Reason)

	out = b.receive(t, d, reports.KindTLSRPT, corpus.Read(t, "tls-rpt/smtp_tls.json"))
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	require.Equal(t, int64(3), b.count(t, "SELECT failure_count FROM tls_reports WHERE id = $1", out.ReportID))
	require.Equal(t, int64(1), b.count(t, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'tls_report_failures'", b.account))

	out = b.receive(t, d, reports.KindTLSRPT, corpus.Read(t, "tls-rpt/rfc8460.json"))
	require.Equal(t, reports.StatusRefused, out.Status)
	require.True(t, strings.Contains(out.Reason, "company-y.example"))
}

// TestParseKeepsDMARCbisPassDisposition: an RFC 9990 report's "pass"
// disposition is stored as reported (the data API and the report detail
// show it), and its messages count as passing, never as failing.
func TestParseKeepsDMARCbisPassDisposition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.domain(t, "example.com")
	raw, err := os.ReadFile("../dmarcrpt/testdata/dmarcbis-pass-disposition.xml")
	require.NoError(t, err)
	out := b.receive(t, d, reports.KindDMARC, raw)
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)

	rows, err := b.tx.Query(context.Background(), "SELECT disposition FROM dmarc_records WHERE report_id = $1 ORDER BY ordinal", out.ReportID)
	require.NoError(t, err)
	dispositions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"pass", "pass", "reject", "none"}, dispositions)

	require.Equal(t, int64(45), b.count(t, "SELECT pass_count FROM dmarc_reports WHERE id = $1", out.ReportID), "the two pass records")
	require.Equal(t, int64(45), b.count(t, "SELECT sum(compliant + forwarded) FROM dmarc_source_days WHERE domain_id = $1", d))
	require.Equal(t, int64(5), b.count(t, "SELECT sum(failing) FROM dmarc_source_days WHERE domain_id = $1", d), "reject and none only")

	now := b.svc.Now()
	sources, err := b.svc.Sources(context.Background(), b.tx, d, now.Add(-30*24*time.Hour), now, reports.MaxSourcesListed)
	require.NoError(t, err)
	category := map[string]string{}
	for _, s := range sources.Sources {
		category[s.Name] = s.Category
	}
	require.Equal(t, map[string]string{
		"192.0.2.10": reports.CategoryCompliant, "192.0.2.20": reports.CategoryCompliant,
		"203.0.113.7": reports.CategoryThreatUnknown, "198.51.100.9": reports.CategoryThreatUnknown,
	}, category)
}
