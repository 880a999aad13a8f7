package reports_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
	"github.com/mailwatch/mailwatch/jobs"
)

const inboundDomain = "inbound.mailwatch.test"

// pipeline is the production path on a database of its own: the SMTP
// listener with reporting addresses in front of the receivers' store, and a
// River client working the parse jobs.
type pipeline struct {
	pool    *pgxpool.Pool
	svc     *reports.Service
	addr    string
	account uuid.UUID
	done    <-chan *river.Event
	q       *dbsqlc.Queries
}

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	logger := slog.New(slog.DiscardHandler)
	keyring := ring(t, key(3))
	deps := jobs.Deps{Pool: pool, Logger: logger, Keyring: keyring}
	client, err := jobs.NewClient(deps, jobs.Options{Concurrency: 4, Queues: []string{river.QueueDefault}})
	require.NoError(t, err)
	done, cancelSub := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancelSub)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	svc := &reports.Service{DB: pool, River: client, Logger: logger, Signer: &reports.Signer{Keyring: keyring, Domain: inboundDomain}}
	store := &reports.SMTPStore{Reports: svc, Next: &receivers.Store{DB: pool, Emitter: &events.Emitter{River: client}, Logger: logger}}
	srv, err := smtpd.NewServer(smtpd.Config{Domain: inboundDomain, MaxMessageBytes: reports.MaxRawBytes}, store, logger)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	account := uuid.Must(uuid.NewV7())
	_, err = dbsqlc.New().AccountInsert(ctx, pool, dbsqlc.AccountInsertParams{ID: account, Email: account.String() + "@example.com", PasswordHash: "x"})
	require.NoError(t, err)
	return &pipeline{pool: pool, svc: svc, addr: l.Addr().String(), account: account, done: done, q: dbsqlc.New()}
}

// signedAddresses registers domain (once) and signs its addresses.
func (p *pipeline) signedAddresses(t *testing.T, domain string) (dmarc, tls string) {
	t.Helper()
	ctx := context.Background()
	d, err := p.q.DomainGetByName(ctx, p.pool, dbsqlc.DomainGetByNameParams{AccountID: p.account, Name: domain})
	if dbutil.IsNotFound(err) {
		d, err = p.q.DomainInsert(ctx, p.pool, dbsqlc.DomainInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: p.account, Name: domain, Tags: []string{}})
	}
	require.NoError(t, err)
	addrs, err := dbutil.WithTxV(ctx, p.pool, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return p.svc.Sign(ctx, tx, p.account, d.ID, domain)
	})
	require.NoError(t, err)
	for _, a := range addrs {
		switch a.Kind {
		case reports.KindDMARC:
			dmarc = a.Address
		case reports.KindTLSRPT:
			tls = a.Address
		}
	}
	return dmarc, tls
}

// send delivers msg to rcpt over a real SMTP session; it returns the RCPT
// error (nil when accepted, after DATA's 250).
func (p *pipeline) send(t *testing.T, rcpt string, msg []byte) error {
	t.Helper()
	c, err := smtp.Dial(p.addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("mx.reporter.example"))
	require.NoError(t, c.Mail("noreply-dmarc@reporter.example", nil))
	if err := c.Rcpt(rcpt, nil); err != nil {
		return err
	}
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write(msg)
	require.NoError(t, err)
	require.NoError(t, w.Close(), "DATA answered 250")
	return c.Quit()
}

// waitJobs waits for n parse jobs to finish.
func (p *pipeline) waitJobs(t *testing.T, n int) {
	t.Helper()
	for n > 0 {
		ev := <-p.done
		if ev.Job.Kind == (reports.ParseArgs{}).Kind() {
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "parse job %d ended %s", ev.Job.ID, ev.Kind)
			n--
		}
	}
}

// asEmail wraps a report file the way reporters send it: an attachment.
func asEmail(name, contentType string, file []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: noreply-dmarc@reporter.example\r\nTo: rua\r\nSubject: Report\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nThis is a report.\r\n"+
		"--b1\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n",
		contentType, name)
	enc := base64.StdEncoding.EncodeToString(file)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b1--\r\n")
	return b.Bytes()
}

func contentTypeOf(name string) string {
	switch {
	case strings.HasSuffix(name, ".gz"):
		return "application/gzip"
	case strings.HasSuffix(name, ".zip"):
		return "application/zip"
	case strings.HasSuffix(name, ".json"):
		return "application/tlsrpt+json"
	}
	return "text/xml"
}

// TestSMTPCorpus sends every file of corpus/dmarc and corpus/tls-rpt over a
// real SMTP session to a signed address of the domain it reports on, and
// checks that each is accepted (or acknowledged as a duplicate) with the
// records and messages its file holds; empty.xml fails with its reason.
func TestSMTPCorpus(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()

	type sent struct {
		file     string
		key      string // org + report id
		records  int
		messages int64
		domain   string
	}
	var all []sent
	dir := corpus.Path(t, "dmarc")
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".md") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if len(data) == 0 {
			return nil // empty.xml: below
		}
		f, _, err := dmarcrpt.ParseFile(data)
		require.NoError(t, err, rel)
		rcpt, _ := p.signedAddresses(t, f.PolicyPublished.Domain)
		msg := data
		if !strings.HasSuffix(rel, ".eml") {
			msg = asEmail(filepath.Base(rel), contentTypeOf(rel), data)
		}
		require.NoError(t, p.send(t, rcpt, msg), rel)
		all = append(all, sent{file: rel, key: f.PolicyPublished.Domain + "|" + f.ReportMetadata.OrgName + "|" + f.ReportMetadata.ReportID,
			records: len(f.Records), messages: f.MessageCount(), domain: f.PolicyPublished.Domain})
		return nil
	}))
	rcpt, _ := p.signedAddresses(t, "example.com")
	require.NoError(t, p.send(t, rcpt, asEmail("empty.xml", "text/xml", corpus.Read(t, "dmarc/empty.xml"))))
	tlsFiles := []string{"rfc8460.json", "smtp_tls.json", "mail.ru.json", "google.com_smtp_tls_report.eml"}
	for _, name := range tlsFiles {
		data := corpus.Read(t, "tls-rpt/"+name)
		r, _, err := tlsrpt.ParseFile(data)
		require.NoError(t, err)
		_, tlsRcpt := p.signedAddresses(t, r.Policies[0].Policy.Domain)
		msg := data
		if !strings.HasSuffix(name, ".eml") {
			msg = asEmail(name, contentTypeOf(name), data)
		}
		require.NoError(t, p.send(t, tlsRcpt, msg), name)
	}
	p.waitJobs(t, len(all)+1+len(tlsFiles))

	// Every aggregate report is stored once, with its records and total.
	stored := map[string]bool{}
	for _, s := range all {
		if stored[s.key] {
			continue
		}
		stored[s.key] = true
		var records int
		var messages, recordSum int64
		parts := strings.SplitN(s.key, "|", 3)
		require.NoError(t, p.pool.QueryRow(ctx, `SELECT r.record_count, r.message_count, (SELECT coalesce(sum(count), 0) FROM dmarc_records WHERE report_id = r.id)::bigint
			FROM dmarc_reports r JOIN domains d ON d.id = r.domain_id WHERE d.name = $1 AND r.org_name = $2 AND r.report_id = $3`,
			parts[0], parts[1], parts[2]).Scan(&records, &messages, &recordSum), s.file)
		require.Equal(t, s.records, records, s.file)
		require.Equal(t, s.messages, messages, s.file)
		require.Equal(t, s.messages, recordSum, s.file)
	}
	var reportsStored, accepted, duplicates int
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM dmarc_reports").Scan(&reportsStored))
	require.Equal(t, len(stored), reportsStored)
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE status = 'accepted'), count(*) FILTER (WHERE status = 'duplicate') FROM report_messages WHERE kind = 'dmarc'").Scan(&accepted, &duplicates))
	require.Equal(t, len(stored), accepted)
	require.Equal(t, len(all)-len(stored), duplicates, "the same report in several wrappers is acknowledged once each")

	var status, reason string
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT status, reason FROM report_messages WHERE kind = 'dmarc' AND status NOT IN ('accepted', 'duplicate')").Scan(&status, &reason))
	require.Equal(t, "failed", status, "empty.xml")
	require.Contains(t, reason, "empty")

	var tlsAccepted int
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM tls_reports").Scan(&tlsAccepted))
	require.Equal(t, len(tlsFiles), tlsAccepted)
}

// TestSMTPRefusals: a forged or tampered address is 550 at RCPT and nothing
// is stored; a report for another domain is stored as refused.
func TestSMTPRefusals(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()
	rcpt, _ := p.signedAddresses(t, "example.com")
	other, _ := p.signedAddresses(t, "example.org")
	report := corpus.Read(t, "dmarc/usssa.com!example.com!1538784000!1538870399.xml")

	local, _, _ := strings.Cut(rcpt, "@")
	last := local[len(local)-1]
	swap := byte('a')
	if last == 'a' {
		swap = 'b'
	}
	for _, bad := range []string{
		local[:len(local)-1] + string(swap) + "@" + inboundDomain, // tampered MAC
		"dmarc+" + strings.Repeat("0", 32) + "@" + inboundDomain,  // forged
		"tlsrpt+" + reports.Token(local) + "@" + inboundDomain,    // a DMARC token under the TLS-RPT kind
	} {
		err := p.send(t, bad, asEmail("r.xml", "text/xml", report))
		var smtpErr *smtp.SMTPError
		var tpErr *textproto.Error
		switch {
		case errors.As(err, &smtpErr):
			require.Equal(t, 550, smtpErr.Code, bad)
		case errors.As(err, &tpErr):
			require.Equal(t, 550, tpErr.Code, bad)
		default:
			t.Fatalf("%s: want 550 at RCPT, got %v", bad, err)
		}
	}
	var n int
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM report_messages").Scan(&n))
	require.Zero(t, n, "nothing stored for refused recipients")

	require.NoError(t, p.send(t, other, asEmail("r.xml", "text/xml", report)))
	require.NoError(t, p.send(t, rcpt, asEmail("r.xml", "text/xml", report)))
	require.NoError(t, p.send(t, rcpt, asEmail("r.xml", "text/xml", report)))
	p.waitJobs(t, 3)
	rows, err := p.pool.Query(ctx, "SELECT status FROM report_messages ORDER BY id")
	require.NoError(t, err)
	statuses, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	// The two copies are parsed by concurrent jobs: whichever commits first
	// is accepted, the other is the duplicate.
	require.Len(t, statuses, 3)
	require.Equal(t, "refused", statuses[0])
	require.ElementsMatch(t, []string{"accepted", "duplicate"}, statuses[1:])
}

// TestParseKilledMidWrite kills the worker's database connection while its
// parse transaction is writing the report, then lets River retry the job:
// the report is parsed once and nothing is lost.
func TestParseKilledMidWrite(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()
	rcpt, _ := p.signedAddresses(t, "example.com")
	data := corpus.Read(t, "dmarc/!large-example.com!1711897200!1711983600.xml")
	f, _, err := dmarcrpt.ParseFile(data)
	require.NoError(t, err)

	// Hold the report's de-duplication key in an open transaction, so the
	// worker's INSERT waits inside its write transaction.
	var domainID uuid.UUID
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT id FROM domains WHERE name = 'example.com'").Scan(&domainID))
	blocker, err := p.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()

	require.NoError(t, p.send(t, rcpt, asEmail("large.xml", "text/xml", data)))
	var messageID uuid.UUID
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT id FROM report_messages").Scan(&messageID))
	_, err = blocker.Exec(ctx, `INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at,
		policy_domain, policy, version, record_count, message_count, pass_count)
		VALUES ($1, $2, $3, $4, $5, '', now(), now(), 'example.com', '{}', '', 0, 0, 0)`,
		uuid.Must(uuid.NewV7()), domainID, messageID, f.ReportMetadata.OrgName, f.ReportMetadata.ReportID)
	require.NoError(t, err)

	// Wait for the worker to block on it, then kill its connection.
	var pid int
	for {
		err := p.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO dmarc_reports%'`).Scan(&pid)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		time.Sleep(10 * time.Millisecond)
	}
	_, err = p.pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.NoError(t, blocker.Rollback(ctx))

	// River retries the failed attempt; the second one parses the report.
	for {
		ev := <-p.done
		if ev.Job.Kind != (reports.ParseArgs{}).Kind() {
			continue
		}
		if ev.Kind == river.EventKindJobCompleted {
			require.Equal(t, 2, ev.Job.Attempt, "completed on the retry")
			break
		}
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
	}
	var status string
	var reportsN, records, eventsN int
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT status FROM report_messages WHERE id = $1", messageID).Scan(&status))
	require.Equal(t, "accepted", status)
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM dmarc_reports").Scan(&reportsN))
	require.Equal(t, 1, reportsN)
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM dmarc_records").Scan(&records))
	require.Equal(t, len(f.Records), records)
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE event_type = 'dmarc_report_received'").Scan(&eventsN))
	require.Equal(t, 1, eventsN)
}
