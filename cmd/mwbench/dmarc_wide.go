package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/jobs"
)

// The wide report of the second hostile probe: 50,000 source IPs over 31
// days, mailed as a gzip attachment.
const (
	wideSources = 50000
	wideDays    = 31
	// baselineRecords is the size of the normal daily report measured
	// beside it.
	baselineRecords = 1000
)

// childEnv names the work a re-executed mwbench does instead of a benchmark
// (see runChild); childDBEnv and childMessageEnv are its inputs.
const (
	childEnv        = "MWBENCH_CHILD"
	childDBEnv      = "MWBENCH_CHILD_DATABASE_URL"
	childMessageEnv = "MWBENCH_CHILD_MESSAGE_ID"
)

// parseChildResult is what a parse child prints on its standard output.
type parseChildResult struct {
	Status       string  `json:"status"`
	Reason       string  `json:"reason"`
	StartHWMKiB  int64   `json:"start_hwm_kib"`
	PeakHWMKiB   int64   `json:"peak_hwm_kib"`
	DurationSecs float64 `json:"duration_seconds"`
}

// benchDMARCWide parses, each in a child process of its own (so that its
// peak RSS, VmHWM, is that parse's alone), a normal 1,000-record daily
// report and the probe's wide report, through reports.Service.Parse as the
// report_parse job calls it; then times GET .../dmarc/sources over the wide
// report's 31 days through the real API, and over 31 days holding 50,000
// source IPs each (1.55 million daily rows).
func benchDMARCWide(ctx context.Context, env *benchEnv) error {
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return err
	}
	defer srv.close()
	accountID, key, err := createAccount(ctx, srv.BaseURL, "dmarc-wide@bench.example")
	if err != nil {
		return err
	}
	q := dbsqlc.New()
	d, err := q.DomainInsert(ctx, env.Pool, dbsqlc.DomainInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: uuid.MustParse(accountID), Name: "example.com", Tags: []string{},
	})
	if err != nil {
		return err
	}
	// An inserting client only: the children parse, not a worker.
	client, err := jobs.NewClient(jobs.Deps{Pool: env.Pool, Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	if err != nil {
		return err
	}
	svc := &reports.Service{DB: env.Pool, River: client}

	end := time.Now().UTC().Truncate(24 * time.Hour)
	begin := end.AddDate(0, 0, -wideDays)
	runs := []struct {
		name       string
		sources    int
		begin, end time.Time
	}{
		{fmt.Sprintf("baseline: %d records, 1 day", baselineRecords), baselineRecords, end.AddDate(0, 0, -1), end},
		{fmt.Sprintf("wide: %d source IPs x %d days", wideSources, wideDays), wideSources, begin, end},
	}
	for i, r := range runs {
		xml := wideReportXML(fmt.Sprintf("wide-%d", i), r.sources, r.begin, r.end)
		mail, gz, err := gzipReportEmail(xml)
		if err != nil {
			return err
		}
		rec, err := dbutil.WithTxV(ctx, env.Pool, func(ctx context.Context, tx pgx.Tx) (reports.Received, error) {
			return svc.Receive(ctx, tx, reports.Incoming{AccountID: uuid.MustParse(accountID), DomainID: d.ID,
				Kind: reports.KindDMARC, Source: reports.SourceSMTP, Raw: mail})
		})
		if err != nil {
			return err
		}
		res, err := runParseChild(ctx, env.URL, rec.MessageID)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		var rows int64
		if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM dmarc_source_days WHERE domain_id = $1", d.ID).Scan(&rows); err != nil {
			return err
		}
		fmt.Printf("%-38s XML %5.1f MB, gzip %4.0f KB, mail %4.0f KB: %-8s peak RSS %5d MiB (%d at start), %6.2f s; dmarc_source_days now %d rows%s\n",
			r.name, float64(len(xml))/1e6, float64(gz)/1e3, float64(len(mail))/1e3, res.Status,
			res.PeakHWMKiB/1024, res.StartHWMKiB/1024, res.DurationSecs, rows, reasonSuffix(res.Reason))
	}

	// The sources of the 31 days, as a dashboard asks for them; then the
	// same over a domain whose 31 days hold 50,000 source IPs each, as 31
	// daily reports of the wide report's size leave them (written
	// directly: parsing them would take the run's whole budget).
	since, until := begin, end.Add(-time.Second)
	if err := benchSources(ctx, srv.BaseURL, key, "example.com", since, until); err != nil {
		return err
	}
	full, err := q.DomainInsert(ctx, env.Pool, dbsqlc.DomainInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: uuid.MustParse(accountID), Name: "full.example.com", Tags: []string{},
	})
	if err != nil {
		return err
	}
	t0 := time.Now()
	tag, err := env.Pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing)
SELECT $1, $2::date + d, '10.' || (i >> 16) || '.' || ((i >> 8) & 255) || '.' || (i & 255), 1 + i % 40, 1, 1, 1 + i % 40, 0, 0
FROM generate_series(0, $3::int - 1) AS d, generate_series(1, $4::int) AS i`, full.ID, begin, wideDays, wideSources)
	if err != nil {
		return err
	}
	if _, err := env.Pool.Exec(ctx, "VACUUM ANALYZE dmarc_source_days"); err != nil {
		return err
	}
	fmt.Printf("full.example.com: %d daily rows written in %s\n", tag.RowsAffected(), time.Since(t0).Round(time.Second))
	return benchSources(ctx, srv.BaseURL, key, "full.example.com", since, until)
}

// benchSources times five GET .../dmarc/sources over [since, until].
func benchSources(ctx context.Context, baseURL, key, domain string, since, until time.Time) error {
	u := baseURL + "/api/accounts/me/domains/" + domain + "/dmarc/sources?" + url.Values{
		"since": {since.Format(time.RFC3339)}, "until": {until.Format(time.RFC3339)},
	}.Encode()
	var times []time.Duration
	var body []byte
	for range 5 {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET sources: status %d: %s", resp.StatusCode, body)
		}
		times = append(times, time.Since(t0))
	}
	var page struct {
		Since       time.Time         `json:"since"`
		Sources     []json.RawMessage `json:"sources"`
		SourceCount int               `json:"source_count"`
		Truncated   bool              `json:"truncated"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return err
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("GET %s sources over %d days, 5 requests: median %s, max %s; %d of %d sources listed, %.1f MB, truncated %v (since %s)\n",
		domain, int(until.Sub(since).Hours()/24)+1, times[2].Round(time.Millisecond), times[4].Round(time.Millisecond),
		len(page.Sources), page.SourceCount, float64(len(body))/1e6, page.Truncated, page.Since.Format(time.DateOnly))
	return nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// runParseChild re-executes this binary to parse one stored report and
// returns what the child measured.
func runParseChild(ctx context.Context, dbURL string, messageID uuid.UUID) (parseChildResult, error) {
	self, err := os.Executable()
	if err != nil {
		return parseChildResult{}, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"=report-parse", childDBEnv+"="+dbURL, childMessageEnv+"="+messageID.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return parseChildResult{}, fmt.Errorf("parse child: %w", err)
	}
	var res parseChildResult
	if err := json.Unmarshal(out, &res); err != nil {
		return parseChildResult{}, fmt.Errorf("parse child answered %q: %w", out, err)
	}
	return res, nil
}

// runChild does the work a parent benchmark asked of a re-executed mwbench
// and returns the exit code. It is called before any benchmark database is
// made.
func runChild(kind string) int {
	if kind != "report-parse" {
		fmt.Fprintf(os.Stderr, "mwbench: unknown child %q\n", kind)
		return 2
	}
	res, err := reportParseChild(context.Background(), os.Getenv(childDBEnv), os.Getenv(childMessageEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mwbench child:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// reportParseChild parses one report as the report_parse job does
// (reports.NewService(...).Parse) and measures its own peak RSS.
func reportParseChild(ctx context.Context, dbURL, messageID string) (parseChildResult, error) {
	id, err := uuid.Parse(messageID)
	if err != nil {
		return parseChildResult{}, err
	}
	pool, err := dbutil.NewPool(ctx, dbURL, 4)
	if err != nil {
		return parseChildResult{}, err
	}
	defer pool.Close()
	start, err := procStatusKB(os.Getpid(), "VmHWM")
	if err != nil {
		return parseChildResult{}, err
	}
	svc := reports.NewService(pool, nil, "")
	svc.Logger = slog.New(slog.DiscardHandler)
	t0 := time.Now()
	out, err := svc.Parse(ctx, id)
	if err != nil {
		return parseChildResult{}, err
	}
	elapsed := time.Since(t0)
	peak, err := procStatusKB(os.Getpid(), "VmHWM")
	if err != nil {
		return parseChildResult{}, err
	}
	return parseChildResult{Status: out.Status, Reason: out.Reason, StartHWMKiB: start, PeakHWMKiB: peak,
		DurationSecs: elapsed.Seconds()}, nil
}

// wideReportXML is an aggregate report for example.com with one record per
// source IP (10.0.0.0/8, in order), a third of them failing DMARC.
func wideReportXML(reportID string, sources int, begin, end time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<feedback><report_metadata><org_name>bench.example</org_name><email>dmarc@bench.example</email><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>
`, reportID, begin.Unix(), end.Unix())
	for i := range sources {
		n := i + 1
		ip := fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)
		result := "pass"
		if i%3 == 0 {
			result = "fail"
		}
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition><dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers><auth_results><dkim><domain>example.com</domain><selector>s1</selector><result>%s</result></dkim><spf><domain>example.com</domain><result>%s</result></spf></auth_results></record>
`, ip, 1+i%40, result, result, result, result)
	}
	b.WriteString("</feedback>\n")
	return b.Bytes()
}

// gzipReportEmail wraps a report as reporters mail it: a gzip attachment.
// It returns the message and the size of the gzip file.
func gzipReportEmail(xml []byte) ([]byte, int, error) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(xml); err != nil {
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	var b bytes.Buffer
	b.WriteString("From: noreply-dmarc@bench.example\r\nTo: dmarc@example.com\r\nSubject: Report Domain: example.com\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nReport.\r\n" +
		"--b1\r\nContent-Type: application/gzip\r\nContent-Disposition: attachment; filename=\"example.com!" +
		strconv.Itoa(len(xml)) + ".xml.gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(gz.Bytes())
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b1--\r\n")
	return b.Bytes(), gz.Len(), nil
}
