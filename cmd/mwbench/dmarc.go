package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	moxdmarcrpt "github.com/mjl-/mox/dmarcrpt"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/jobs"
)

// benchDMARC measures the aggregate report parser on the corpus's
// 2,286-record report next to mox's parser on the same bytes in the same
// run, counts which corpus files each accepts, then sends BENCH_REPORTS
// (default 1,000) reports over SMTP to a signed address and times end of
// DATA -> parse job committed (dmarc_report_received written).
func benchDMARC(ctx context.Context, env *benchEnv) error {
	dir, err := corpus.Dir()
	if err != nil {
		return err
	}
	large, err := os.ReadFile(filepath.Join(dir, "dmarc", "!large-example.com!1711897200!1711983600.xml"))
	if err != nil {
		return err
	}
	if err := benchDMARCParse(ctx, large); err != nil {
		return err
	}
	if err := benchDMARCCorpus(dir); err != nil {
		return err
	}
	return benchDMARCSMTP(ctx, env, dir)
}

func benchDMARCParse(ctx context.Context, data []byte) error {
	// Rounds alternate the two parsers so a noisy machine hurts both alike.
	budget := benchDuration() / 2
	var ours, theirs time.Duration
	var oursN, theirsN, records int
	for ours+theirs < 2*budget && ctx.Err() == nil {
		t0 := time.Now()
		f, err := dmarcrpt.Parse(data)
		if err != nil {
			return fmt.Errorf("mailwatch parser: %w", err)
		}
		ours += time.Since(t0)
		oursN++
		records = len(f.Records)
		t0 = time.Now()
		if _, err := moxdmarcrpt.ParseReport(bytes.NewReader(data)); err != nil {
			return fmt.Errorf("mox parser: %w", err)
		}
		theirs += time.Since(t0)
		theirsN++
	}
	mb := float64(len(data)) / 1e6
	row := func(name string, n int, d time.Duration) float64 {
		per := d.Seconds() / float64(n)
		fmt.Printf("  %-10s %6d parses  %8.1f MB/s  %10.0f records/s  %6.2f ms/report\n", name, n, mb/per, float64(records)/per, per*1000)
		return per
	}
	fmt.Printf("parse: %.0f KB, %d records, %s per parser\n", float64(len(data))/1e3, records, budget)
	a := row("mailwatch", oursN, ours)
	b := row("mox", theirsN, theirs)
	fmt.Printf("  mailwatch / mox throughput: %.2fx\n", b/a)
	return nil
}

// benchDMARCCorpus counts the corpus XML files each parser accepts.
func benchDMARCCorpus(dir string) error {
	var files, oursOK, moxOK int
	var moxRefused []string
	err := filepath.WalkDir(filepath.Join(dir, "dmarc"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".xml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if _, err := dmarcrpt.Parse(data); err == nil {
			oursOK++
		}
		if _, err := moxdmarcrpt.ParseReport(bytes.NewReader(data)); err == nil {
			moxOK++
		} else {
			moxRefused = append(moxRefused, filepath.Base(p))
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("corpus XML files accepted: mailwatch %d/%d, mox %d/%d (mox refuses: %s)\n",
		oursOK, files, moxOK, files, strings.Join(moxRefused, ", "))
	return nil
}

var reportIDRe = regexp.MustCompile(`<report_id>[^<]*</report_id>`)

func benchDMARCSMTP(ctx context.Context, env *benchEnv, dir string) error {
	n := benchReportCount()
	template, err := os.ReadFile(filepath.Join(dir, "dmarc", "extract_report", "nice-input.xml"))
	if err != nil {
		return err
	}
	p, err := startDMARCPipeline(ctx, env)
	if err != nil {
		return err
	}
	defer p.close()
	rcpt, err := signedReportAddress(ctx, env, p.svc)
	if err != nil {
		return err
	}

	// Latency runs from the 250 reply to DATA (the report is stored and its
	// parse job queued) to River's completed event of the parse job, which
	// follows the commit of the parse with dmarc_report_received. At most
	// maxInFlight reports are sent and not yet parsed: the parse workers'
	// concurrency, so the queue never builds a backlog that the percentiles
	// would measure instead of the pipeline.
	const maxInFlight = 16
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inFlight := make(chan struct{}, maxInFlight)
	repliedAt := make([]time.Time, n)
	parsedAt := make([]time.Time, n)
	collected := make(chan error, 1)
	go func() {
		defer cancel()
		collected <- collectParses(ctx, env, p.done, parsedAt, inFlight)
	}()

	const conns = 8
	start := time.Now()
	if err := sendReports(ctx, p.smtpAddr, rcpt, template, conns, inFlight, repliedAt); err != nil {
		cancel() // a sender failed: the parses it never sent will not come
		if cerr := <-collected; cerr != nil && !errors.Is(cerr, context.Canceled) {
			return fmt.Errorf("waiting for parse jobs: %w", cerr)
		}
		return err
	}
	if err := <-collected; err != nil {
		return fmt.Errorf("waiting for parse jobs: %w", err)
	}
	elapsed := time.Since(start)
	latencies := make([]time.Duration, n)
	for i := range n {
		// A parse may be seen before its sender read the 250: no wait.
		latencies[i] = max(parsedAt[i].Sub(repliedAt[i]), 0)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	fmt.Printf("smtp: %d reports over %d connections in %s: %.0f reports/s; 250 to DATA -> parsed and dmarc_report_received committed (at most %d in flight): p50 %s, p99 %s\n",
		n, conns, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), maxInFlight,
		percentile(latencies, 50).Round(time.Microsecond), percentile(latencies, 99).Round(time.Microsecond))
	return nil
}

// benchReportCount is BENCH_REPORTS, or 1,000.
func benchReportCount() int {
	n := 1000
	if s := os.Getenv("BENCH_REPORTS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	return n
}

// dmarcPipeline is the report path under measure: an SMTP server storing
// reports through reports.SMTPStore, and a River client running their
// parse jobs.
type dmarcPipeline struct {
	svc      *reports.Service
	done     <-chan *river.Event // River's completed jobs
	smtpAddr string
	close    func()
}

// startDMARCPipeline starts the River client (16 workers) and the SMTP
// server on a loopback port; close stops both.
func startDMARCPipeline(ctx context.Context, env *benchEnv) (*dmarcPipeline, error) {
	logger := slog.New(slog.DiscardHandler)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		return nil, err
	}
	deps := jobs.Deps{Pool: env.Pool, Logger: logger, Keyring: keyring}
	client, err := jobs.NewClient(deps, jobs.Options{Concurrency: 16, Queues: []string{river.QueueDefault}})
	if err != nil {
		return nil, err
	}
	done, cancelSub := client.Subscribe(river.EventKindJobCompleted)
	if err := client.Start(ctx); err != nil {
		cancelSub()
		return nil, err
	}
	stopClient := func() {
		_ = client.Stop(context.Background())
		cancelSub()
	}

	svc := &reports.Service{DB: env.Pool, River: client, Logger: logger, Signer: &reports.Signer{Keyring: keyring, Domain: "inbound.mailwatch.test"}}
	store := &reports.SMTPStore{Reports: svc, Next: &receivers.Store{DB: env.Pool, Emitter: &events.Emitter{River: client}, Logger: logger}}
	srv, err := smtpd.NewServer(smtpd.Config{Domain: "inbound.mailwatch.test"}, store, logger)
	if err != nil {
		stopClient()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopClient()
		return nil, err
	}
	go func() { _ = srv.Serve(l) }()
	return &dmarcPipeline{svc: svc, done: done, smtpAddr: l.Addr().String(), close: func() {
		srv.Close()
		stopClient()
	}}, nil
}

// signedReportAddress creates an account with the domain example.com and
// returns its first signed report address.
func signedReportAddress(ctx context.Context, env *benchEnv, svc *reports.Service) (string, error) {
	q := dbsqlc.New()
	account := uuid.Must(uuid.NewV7())
	if _, err := q.AccountInsert(ctx, env.Pool, dbsqlc.AccountInsertParams{ID: account, Email: account.String() + "@bench.example", PasswordHash: "x"}); err != nil {
		return "", err
	}
	d, err := q.DomainInsert(ctx, env.Pool, dbsqlc.DomainInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: account, Name: "example.com", Tags: []string{}})
	if err != nil {
		return "", err
	}
	addrs, err := dbutil.WithTxV(ctx, env.Pool, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return svc.Sign(ctx, tx, account, d.ID, d.Name)
	})
	if err != nil {
		return "", err
	}
	return addrs[0].Address, nil
}

// collectParses notes, in parsedAt, when each report's parse job completed
// (reports are numbered by their report id, "bench-<i>") and frees its
// inFlight slot, until every report is parsed or ctx ends.
func collectParses(ctx context.Context, env *benchEnv, done <-chan *river.Event, parsedAt []time.Time, inFlight <-chan struct{}) error {
	n := len(parsedAt)
	for got := 0; got < n; {
		select {
		case ev := <-done:
			if ev.Job.Kind != (reports.ParseArgs{}).Kind() {
				continue
			}
			at := time.Now()
			var rid string
			err := env.Pool.QueryRow(ctx, "SELECT r.report_id FROM dmarc_reports r WHERE r.message_id = (($1::jsonb)->>'message_id')::uuid", string(ev.Job.EncodedArgs)).Scan(&rid)
			if err != nil {
				return fmt.Errorf("report of job %d: %w", ev.Job.ID, err)
			}
			i, err := strconv.Atoi(strings.TrimPrefix(rid, "bench-"))
			if err != nil || i < 0 || i >= n {
				return fmt.Errorf("unexpected report id %q", rid)
			}
			parsedAt[i] = at
			got++
			<-inFlight
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// sendReports sends len(repliedAt) reports made from template to rcpt over
// conns SMTP connections, each taking an inFlight slot first, and notes in
// repliedAt when each DATA was answered. It returns the first sender's
// error.
func sendReports(ctx context.Context, addr, rcpt string, template []byte, conns int, inFlight chan<- struct{}, repliedAt []time.Time) error {
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sendReportsOn(ctx, addr, rcpt, template, c, conns, inFlight, repliedAt); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// sendReportsOn is one connection of sendReports: it sends reports c,
// c+conns, c+2*conns, ...
func sendReportsOn(ctx context.Context, addr, rcpt string, template []byte, c, conns int, inFlight chan<- struct{}, repliedAt []time.Time) error {
	sc, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer sc.Close()
	if err := sc.Hello("bench.example"); err != nil {
		return err
	}
	for i := c; i < len(repliedAt); i += conns {
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		xml := reportIDRe.ReplaceAll(template, []byte("<report_id>bench-"+strconv.Itoa(i)+"</report_id>"))
		msg := benchReportEmail(xml)
		if err := sc.Mail("noreply-dmarc@reporter.example", nil); err != nil {
			return err
		}
		if err := sc.Rcpt(rcpt, nil); err != nil {
			return err
		}
		w, err := sc.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		if err := w.Close(); err != nil { // ends DATA and reads the 250
			return fmt.Errorf("report %d: DATA: %w", i, err)
		}
		repliedAt[i] = time.Now()
	}
	return nil
}

// benchReportEmail wraps a report as reporters send it: a gzip-less XML
// attachment.
func benchReportEmail(xml []byte) []byte {
	var b bytes.Buffer
	b.WriteString("From: noreply-dmarc@reporter.example\r\nSubject: Report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nReport.\r\n" +
		"--b1\r\nContent-Type: text/xml\r\nContent-Disposition: attachment; filename=\"r.xml\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(xml)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b1--\r\n")
	return b.Bytes()
}
