package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
	"github.com/mailwatch/mailwatch/jobs"
)

// rptRawDo sends a raw body (a report file) through the whole stack and
// checks the response against the OpenAPI document.
func (b *testBundle) rptRawDo(t *testing.T, method, path, key, contentType string, body []byte) response {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	checkConformanceAs(t, b.srv, method, path, key, contentType, body, out)
	return out
}

// rptParse runs the parse job's work for a received report, as the worker
// would, on the test's transaction.
// uploadParsed uploads a report file to path (202) and runs its parse job,
// returning what the upload answered.
func (b *testBundle) uploadParsed(t *testing.T, key, path, contentType string, body []byte) api.ReceivedReport {
	t.Helper()
	resp := b.rptRawDo(t, "POST", path, key, contentType, body)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var rec api.ReceivedReport
	resp.JSON(t, &rec)
	b.rptParse(t, rec.ID)
	return rec
}

func (b *testBundle) rptParse(t *testing.T, id uuid.UUID) {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	svc := &reports.Service{DB: b.db, Emitter: &events.Emitter{River: client}}
	_, err = svc.Parse(context.Background(), id)
	require.NoError(t, err)
}

func TestReportingAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com/reporting-address"

	resp := b.do(t, "GET", base, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var before api.ReportingAddress
	resp.JSON(t, &before)
	require.False(t, before.Signed, "minted at registration, not signed")
	require.Len(t, before.Addresses, 2, "minted at registration: they route before any sign")
	require.Equal(t, before.DMARCAddress, before.Addresses[0].Address)
	require.True(t, strings.HasPrefix(before.DMARCAddress, "dmarc+"))
	require.True(t, strings.HasSuffix(before.DMARCAddress, "@inbound.mailwatch.test"))
	require.Equal(t, "mailto:"+before.DMARCAddress, before.DMARC.RUA)
	require.Equal(t, "example.com._report._dmarc.inbound.mailwatch.test", before.Authorization.Name)
	require.Equal(t, "v=DMARC1", before.Authorization.Value)

	resp = b.do(t, "POST", base+"/sign", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var signed api.ReportingAddress
	resp.JSON(t, &signed)
	require.True(t, signed.Signed)
	require.Equal(t, before.Addresses, signed.Addresses, "deterministic: signing mints nothing new")
	require.Equal(t, before.DMARCAddress, signed.DMARCAddress, "deterministic")

	resp = b.do(t, "POST", base+"/sign", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var again api.ReportingAddress
	resp.JSON(t, &again)
	require.Equal(t, signed.Addresses, again.Addresses, "signing is idempotent")

	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base, other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", base+"/sign", other.Key, nil).Status)
}

func TestReportUploadAndLists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"

	upload := func(file, kind string) api.ReceivedReport {
		t.Helper()
		path := base + "/reports"
		if kind != "" {
			path += "?kind=" + kind
		}
		resp := b.rptRawDo(t, "POST", path, acct.Key, "application/octet-stream", corpus.Read(t, file))
		require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
		var rec api.ReceivedReport
		resp.JSON(t, &rec)
		require.Equal(t, "pending", rec.Status)
		require.NotZero(t, rec.JobID)
		b.rptParse(t, rec.ID)
		resp = b.do(t, "GET", base+"/reports/"+rec.ID.String(), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		resp.JSON(t, &rec)
		return rec
	}

	for _, file := range []string{"dmarc/extract_report/nice-input.xml", "dmarc/extract_report/nice-input.xml.gz", "dmarc/extract_report/nice-input.xml.zip"} {
		rec := upload(file, "")
		if strings.HasSuffix(file, ".xml") {
			require.Equal(t, "accepted", rec.Status, "%v", rec.Reason)
		} else {
			require.Equal(t, "duplicate", rec.Status, "the same report in another wrapper is stored once")
		}
	}
	rec := upload("dmarc/ikea.com!example.de!1538690400!1538776800.xml", "")
	require.Equal(t, "refused", rec.Status)
	require.Contains(t, *rec.Reason, "example.de")

	resp := b.do(t, "GET", base+"/dmarc/reports?limit=1", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var list []api.DMARCReportSummary
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	next := nextLink(t, resp)
	require.Equal(t, base+"/dmarc/reports?cursor="+resp.Header.Get("X-Next-Cursor")+"&limit=1", next)
	// The one accepted report filled the page; the Link's page is the
	// (empty) rest of the list.
	rest := b.do(t, "GET", next, acct.Key, nil)
	require.Equal(t, http.StatusOK, rest.Status, "%s", rest.Body)
	require.JSONEq(t, "[]", string(rest.Body))
	lastPage(t, rest)

	resp = b.do(t, "GET", base+"/dmarc/reports/"+list[0].ID.String(), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var detail api.DMARCReport
	resp.JSON(t, &detail)
	require.Len(t, detail.RecordList, detail.Records)
	var sum int64
	for _, r := range detail.RecordList {
		sum += r.Count
	}
	require.Equal(t, detail.Messages, sum)

	// Sources over the report's day, and the guidance (no DNS check yet:
	// no DMARC record known, so publishing one is the first step).
	resp = b.do(t, "GET", base+"/dmarc/sources?since=2024-06-01T00:00:00Z&until=2024-06-30T00:00:00Z", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var sources api.Sources
	resp.JSON(t, &sources)
	require.NotEmpty(t, sources.Sources)
	var volume int64
	for _, src := range sources.Sources {
		volume += src.Messages
		require.Contains(t, []string{"compliant", "forwarded", "non_compliant", "threat_unknown"}, src.Category)
	}
	require.Equal(t, list[0].Messages, volume)
	require.Equal(t, len(sources.Sources), sources.SourceCount)
	resp = b.do(t, "GET", base+"/dmarc/sources?since=2024-06-01T00:00:00Z&until=2024-06-30T00:00:00Z&limit=1", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var first api.Sources
	resp.JSON(t, &first)
	require.Equal(t, sources.Sources[:1], first.Sources, "the first source by volume")
	require.Equal(t, sources.SourceCount, first.SourceCount, "counting every source")
	resp = b.do(t, "GET", base+fmt.Sprintf("/dmarc/sources?limit=%d", reports.MaxSourcesListed+1), acct.Key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "the limit is bounded by MaxSourcesListed")
	resp = b.do(t, "GET", base+fmt.Sprintf("/dmarc/sources?limit=%d", reports.MaxSourcesListed), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp = b.do(t, "GET", base+"/dmarc/sources?since=2024-06-30T00:00:00Z&until=2024-06-01T00:00:00Z", acct.Key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	resp = b.do(t, "GET", base+"/dmarc/sources?since=yesterday", acct.Key, nil)
	require.Equal(t, http.StatusBadRequest, resp.Status)
	resp = b.do(t, "GET", base+"/dmarc/guidance", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var guidance reports.Guidance
	resp.JSON(t, &guidance)
	require.Equal(t, "none", guidance.Readiness.NextPolicy)
	require.False(t, guidance.Readiness.Ready)

	tls := upload("tls-rpt/google.com_smtp_tls_report.eml", "tlsrpt")
	require.Equal(t, "refused", tls.Status, "the report is for cardinalhealth.ca")
	tls = upload("tls-rpt/mail.ru.json", "tlsrpt")
	require.Equal(t, "accepted", tls.Status, "%v", tls.Reason)
	resp = b.do(t, "GET", base+"/tls-reports", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var tlsList []api.TLSReportSummary
	resp.JSON(t, &tlsList)
	require.Len(t, tlsList, 1)
	resp = b.do(t, "GET", base+"/tls-reports/"+tlsList[0].ID.String(), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var tlsDetail api.TLSReport
	resp.JSON(t, &tlsDetail)
	require.Equal(t, int64(2), tlsDetail.FailuresByType["sts-policy-fetch-error"])

	resp = b.do(t, "GET", "/api/accounts/me/dashboard-summary", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var dash api.DashboardSummary
	resp.JSON(t, &dash)
	require.Equal(t, int64(1), dash.Reports.DMARCReports30d)
	require.Equal(t, int64(1), dash.Reports.TLSReports30d)
	require.Equal(t, int64(2), dash.Reports.Unusable30d, "ikea (another domain) and the Google TLS report (another domain)")
	require.NotNil(t, dash.Reports.DMARCPassRate30d)

	// A report the parser fails on keeps its raw bytes, for reparse-reports;
	// a refused one does not.
	require.False(t, rec.RawKept)
	resp = b.rptRawDo(t, "POST", base+"/reports", acct.Key, "application/octet-stream", []byte("<feedback><oops"))
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var broken api.ReceivedReport
	resp.JSON(t, &broken)
	b.rptParse(t, broken.ID)
	resp = b.do(t, "GET", base+"/reports/"+broken.ID.String(), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &broken)
	require.Equal(t, "failed", broken.Status)
	require.True(t, broken.RawKept, "%s", resp.Body)

	// Bad input: an unknown kind, an empty body, another account.
	require.Equal(t, http.StatusUnprocessableEntity, b.rptRawDo(t, "POST", base+"/reports?kind=spf", acct.Key, "", []byte("x")).Status)
	resp = b.rptRawDo(t, "POST", base+"/reports", acct.Key, "", nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Contains(t, resp.Detail(t), "empty")
	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.rptRawDo(t, "POST", base+"/reports", other.Key, "", []byte("<feedback/>")).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/dmarc/reports/"+list[0].ID.String(), other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/reports/"+rec.ID.String(), other.Key, nil).Status)
}

func TestTLSRPTIngress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	resp := b.do(t, "POST", "/api/accounts/me/domains/example.com/reporting-address/sign", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var addr api.ReportingAddress
	resp.JSON(t, &addr)

	resp = b.rptRawDo(t, "POST", addr.TLSRPTPath, "", "application/tlsrpt+json", corpus.Read(t, "tls-rpt/smtp_tls.json"))
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var got api.IngressAccepted
	resp.JSON(t, &got)
	b.rptParse(t, got.ID)
	resp = b.do(t, "GET", "/api/accounts/me/domains/example.com/reports/"+got.ID.String(), acct.Key, nil)
	var rec api.ReceivedReport
	resp.JSON(t, &rec)
	require.Equal(t, "accepted", rec.Status, "%v", rec.Reason)
	require.Equal(t, "https", rec.Source)

	// A tampered token is 404, before anything is stored.
	tampered := addr.TLSRPTPath[:len(addr.TLSRPTPath)-1] + "0"
	if tampered == addr.TLSRPTPath {
		tampered = addr.TLSRPTPath[:len(addr.TLSRPTPath)-1] + "1"
	}
	resp = b.rptRawDo(t, "POST", tampered, "", "application/tlsrpt+json", corpus.Read(t, "tls-rpt/smtp_tls.json"))
	require.Equal(t, http.StatusNotFound, resp.Status)
	resp = b.rptRawDo(t, "POST", addr.TLSRPTPath, "", "text/html", []byte("{}"))
	require.Equal(t, http.StatusUnsupportedMediaType, resp.Status)

	stored := func() int {
		return b.count(t, `SELECT count(*) FROM report_messages WHERE kind = 'tlsrpt' AND source = 'https'`)
	}
	require.Equal(t, 1, stored())

	t.Run("RepostIsAcknowledgedNotStored", func(t *testing.T) {
		// Parsed already: the tls_reports row answers. The same report
		// gzip-compressed is the same report.
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(corpus.Read(t, "tls-rpt/smtp_tls.json"))
		require.NoError(t, zw.Close())
		for _, post := range []struct {
			ct   string
			body []byte
		}{{"application/tlsrpt+json", corpus.Read(t, "tls-rpt/smtp_tls.json")}, {"application/tlsrpt+gzip", gz.Bytes()}} {
			resp := b.rptRawDo(t, "POST", addr.TLSRPTPath, "", post.ct, post.body)
			require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
			var dup api.IngressAccepted
			resp.JSON(t, &dup)
			require.Equal(t, "duplicate", dup.Status)
			require.Equal(t, got.ID, dup.ID)
		}
		require.Equal(t, 1, stored())
	})

	t.Run("RepostBeforeTheParseIsAcknowledgedNotStored", func(t *testing.T) {
		// Not parsed yet: the ingress claim answers.
		raw := corpus.Read(t, "tls-rpt/rfc8460.json")
		var first api.IngressAccepted
		for i := range 3 {
			resp := b.rptRawDo(t, "POST", addr.TLSRPTPath, "", "application/tlsrpt+json", raw)
			require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
			var ack api.IngressAccepted
			resp.JSON(t, &ack)
			if i == 0 {
				require.Equal(t, "pending", ack.Status)
				first = ack
				continue
			}
			require.Equal(t, "duplicate", ack.Status)
			require.Equal(t, first.ID, ack.ID)
		}
		require.Equal(t, 2, stored())
	})

	t.Run("InvalidBodiesAreRefusedBeforeStoring", func(t *testing.T) {
		var bomb bytes.Buffer
		zw := gzip.NewWriter(&bomb)
		_, _ = zw.Write([]byte(`{"report-id":"`))
		_, _ = zw.Write(bytes.Repeat([]byte("a"), 21<<20))
		require.NoError(t, zw.Close())
		for _, c := range []struct {
			body   []byte
			status int
			detail string
		}{
			{[]byte("not json"), http.StatusBadRequest, "neither JSON nor gzip"},
			{[]byte(`{"report-id": `), http.StatusBadRequest, "not valid JSON"},
			{[]byte("\x1f\x8b\x08\x00garbage"), http.StatusBadRequest, "gzip"},
			{[]byte(`{"organization-name": "x"}`), http.StatusUnprocessableEntity, "no report-id"},
			{[]byte(`{"report-id": "r1", "date-range": {"start-datetime": "2024-01-01T00:00:00Z", "end-datetime": "2024-01-02T00:00:00Z"}}`), http.StatusUnprocessableEntity, "no policies"},
			{[]byte("  \n"), http.StatusUnprocessableEntity, "empty"},
			{bomb.Bytes(), http.StatusRequestEntityTooLarge, "20 MB"},
		} {
			resp := b.rptRawDo(t, "POST", addr.TLSRPTPath, "", "application/tlsrpt+json", c.body)
			require.Equal(t, c.status, resp.Status, "%q: %s", c.body[:min(len(c.body), 20)], resp.Body)
			require.Contains(t, resp.Detail(t), c.detail)
		}
		require.Equal(t, 2, stored())
	})
}

// TestReportUploadCorpus uploads every file of corpus/dmarc and
// corpus/tls-rpt to the domain it reports on: each is accepted, or
// acknowledged as a duplicate of the same report in another wrapper;
// empty.xml is refused at once.
func TestReportUploadCorpus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	b.setPlan(t, acct.ID, "business") // the corpus reports on more domains than free allows
	created := map[string]bool{}
	upload := func(rel, kind, domain string) string {
		t.Helper()
		if !created[domain] {
			createDomain(t, b, acct.Key, domain)
			created[domain] = true
		}
		base := "/api/accounts/me/domains/" + domain
		resp := b.rptRawDo(t, "POST", base+"/reports?kind="+kind, acct.Key, "application/octet-stream", corpus.Read(t, rel))
		require.Equal(t, http.StatusAccepted, resp.Status, "%s: %s", rel, resp.Body)
		var rec api.ReceivedReport
		resp.JSON(t, &rec)
		b.rptParse(t, rec.ID)
		resp = b.do(t, "GET", base+"/reports/"+rec.ID.String(), acct.Key, nil)
		resp.JSON(t, &rec)
		return rec.Status
	}
	keys := map[string]bool{}
	var accepted, duplicates int
	dir := corpus.Path(t, "dmarc")
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".md") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if len(data) == 0 {
			resp := b.rptRawDo(t, "POST", "/api/accounts/me/domains/example.com/reports", acct.Key, "", data)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "empty.xml")
			return nil
		}
		f, _, err := dmarcrpt.ParseFile(data)
		require.NoError(t, err, rel)
		key := f.PolicyPublished.Domain + "|" + f.ReportMetadata.OrgName + "|" + f.ReportMetadata.ReportID
		status := upload("dmarc/"+filepath.ToSlash(rel), "dmarc", f.PolicyPublished.Domain)
		if keys[key] {
			require.Equal(t, "duplicate", status, rel)
			duplicates++
		} else {
			require.Equal(t, "accepted", status, rel)
			accepted++
		}
		keys[key] = true
		return nil
	}))
	require.Positive(t, duplicates)
	require.Equal(t, len(keys), accepted)
	for _, name := range []string{"rfc8460.json", "smtp_tls.json", "mail.ru.json", "google.com_smtp_tls_report.eml"} {
		r, _, err := tlsrpt.ParseFile(corpus.Read(t, "tls-rpt/"+name))
		require.NoError(t, err)
		require.Equal(t, "accepted", upload("tls-rpt/"+name, "tlsrpt", r.Policies[0].Policy.Domain), name)
	}
}

func TestFailureReportList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"

	for _, file := range []string{
		"dmarc-forensic/dmarc_ruf_report_linkedin.eml", "dmarc-forensic/dmarc_ruf_report_linkedin.crlf.eml",
		"dmarc/extract_report/nice-input.xml", // an aggregate report: not listed
	} {
		b.uploadParsed(t, acct.Key, base+"/reports", "message/rfc822", corpus.Read(t, file))
	}

	resp := b.do(t, "GET", base+"/dmarc/failure-reports?limit=1", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var page []api.FailureReport
	resp.JSON(t, &page)
	require.Len(t, page, 1)
	cursor := resp.Header.Get("X-Next-Cursor")
	require.NotEmpty(t, cursor)
	resp = b.do(t, "GET", base+"/dmarc/failure-reports?limit=1&cursor="+cursor, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var next []api.FailureReport
	resp.JSON(t, &next)
	require.Len(t, next, 1)
	require.NotEqual(t, page[0].ID, next[0].ID)

	resp = b.do(t, "GET", base+"/dmarc/failure-reports", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var all []api.FailureReport
	resp.JSON(t, &all)
	require.Len(t, all, 2, "the two failure reports, not the aggregate one")
	for _, f := range all {
		require.Equal(t, "upload", f.Source)
		require.Equal(t, "10.10.10.10", f.SourceIP)
		require.Equal(t, "example.com", f.ReportedDomain)
		require.Equal(t, "<01010101010101010101010101010101@ABAB01MS0016.someserver.loc>", f.MessageID)
	}
	require.NotContains(t, string(resp.Body), "HTML Text", "never the reported message's body")
	require.NotContains(t, string(resp.Body), "Alternative")

	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", base+"/dmarc/failure-reports?limit=0", acct.Key, nil).Status)
	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/dmarc/failure-reports", other.Key, nil).Status)
}

// reportFor is a minimal aggregate report on domain, as the single body of
// an email.
func reportFor(domain, id string) string {
	return "From: noreply-dmarc@receiver.example\nTo: rua\nSubject: Report Domain: " + domain + "\nMIME-Version: 1.0\n" +
		"Content-Type: text/xml\n\n" +
		"<feedback><report_metadata><org_name>receiver.example</org_name><report_id>" + id + "</report_id>" +
		"<date_range><begin>1718064000</begin><end>1718150399</end></date_range></report_metadata>" +
		"<policy_published><domain>" + domain + "</domain><p>none</p></policy_published>" +
		"<record><row><source_ip>192.0.2.10</source_ip><count>7</count><policy_evaluated><disposition>none</disposition>" +
		"<dkim>pass</dkim><spf>pass</spf></policy_evaluated></row><identifiers><header_from>" + domain + "</header_from></identifiers>" +
		"<auth_results><dkim><domain>" + domain + "</domain><result>pass</result></dkim></auth_results></record></feedback>\n"
}

// reportingFixture is a test server with one account, the reports service
// over the same database and keyring, and a real SMTP listener in front of
// it (the reporting addresses' route).
func reportingFixture(t *testing.T) (*testBundle, account, *reports.Service, string) {
	t.Helper()
	var keyring *secretbox.Keyring
	b := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { keyring = d.Keyring } })
	acct := b.createAccount(t)
	riverClient, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	svc := &reports.Service{DB: b.db, River: riverClient, Signer: &reports.Signer{Keyring: keyring, Domain: testInboundDomain}}
	smtpAddr := startSMTP(t, &reports.SMTPStore{Reports: svc, Next: testStore(t, b.db)}, reports.MaxRawBytes)
	return b, acct, svc, smtpAddr
}

// TestReportingAddressRoutesFromRegistration: the address GET
// .../reporting-address shows is the one a user publishes in rua, so it
// must route at once, without POST .../sign. A report mailed to it over a
// real SMTP session is accepted (250) and stored, for a domain registered
// now (minted with it) and for one registered before registration minted
// (minted by the read). The TLS-RPT HTTPS path shown routes too. Signing
// stays idempotent and is what asks the domain's DNS to name the address.
func TestReportingAddressRoutesFromRegistration(t *testing.T) {
	t.Parallel()
	b, acct, _, smtpAddr := reportingFixture(t)

	createDomain(t, b, acct.Key, "example.com")
	createDomain(t, b, acct.Key, "example.org")
	// example.org stands for a domain registered before registration
	// minted: it has no addresses until they are shown.
	b.rcvExec(t, `DELETE FROM reporting_addresses WHERE domain_id = (SELECT id FROM domains WHERE name = 'example.org' AND account_id = $1)`, acct.ID)

	for _, domain := range []string{"example.com", "example.org"} {
		base := "/api/accounts/me/domains/" + domain
		resp := b.do(t, "GET", base+"/reporting-address", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var shown api.ReportingAddress
		resp.JSON(t, &shown)
		require.False(t, shown.Signed, domain)
		require.Equal(t, "mailto:"+shown.DMARCAddress, shown.DMARC.RUA, "the rua the user publishes")

		require.NoError(t, sendMail(smtpAddr, "noreply-dmarc@receiver.example", []string{shown.DMARCAddress}, reportFor(domain, domain+"-1")),
			"%s: the shown address is accepted (250), never 550 5.1.1", domain)
		var id uuid.UUID
		var source string
		require.NoError(t, b.db.QueryRow(context.Background(), `SELECT rm.id, rm.source FROM report_messages rm JOIN domains d ON d.id = rm.domain_id
			WHERE d.name = $1 AND d.account_id = $2`, domain, acct.ID).Scan(&id, &source), domain)
		require.Equal(t, reports.SourceSMTP, source)
		b.rptParse(t, id)
		resp = b.do(t, "GET", base+"/reports/"+id.String(), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var rec api.ReceivedReport
		resp.JSON(t, &rec)
		require.Equal(t, "accepted", rec.Status, "%v", rec.Reason)
		resp = b.do(t, "GET", base+"/dmarc/reports", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var list []api.DMARCReportSummary
		resp.JSON(t, &list)
		require.Len(t, list, 1, domain)
		require.Equal(t, int64(7), list[0].Passing)

		tls := `{"organization-name":"receiver.example","date-range":{"start-datetime":"2024-06-10T00:00:00Z",` +
			`"end-datetime":"2024-06-10T23:59:59Z"},"contact-info":"tls-reports@receiver.example","report-id":"` + domain + `-tls",` +
			`"policies":[{"policy":{"policy-type":"no-policy-found","policy-domain":"` + domain + `"},` +
			`"summary":{"total-successful-session-count":10,"total-failure-session-count":0}}]}`
		resp = b.rptRawDo(t, "POST", shown.TLSRPTPath, "", "application/tlsrpt+json", []byte(tls))
		require.Equal(t, http.StatusAccepted, resp.Status, "%s: %s", domain, resp.Body)

		// Showing again mints nothing new; signing marks the same addresses.
		resp = b.do(t, "POST", base+"/reporting-address/sign", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var signed api.ReportingAddress
		resp.JSON(t, &signed)
		require.True(t, signed.Signed)
		require.Equal(t, shown.Addresses, signed.Addresses)
		resp = b.do(t, "GET", base+"/reporting-address", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var again api.ReportingAddress
		resp.JSON(t, &again)
		require.True(t, again.Signed, "signing is kept")
		require.Equal(t, shown.Addresses, again.Addresses)
	}
	var n int
	require.NoError(t, b.db.QueryRow(context.Background(), `SELECT count(*) FROM reporting_addresses ra JOIN domains d ON d.id = ra.domain_id
		WHERE d.account_id = $1`, acct.ID).Scan(&n))
	require.Equal(t, 4, n, "two addresses per domain, minted once")
}

// TestReportingAddressMintedWithoutBeingShown: an address shown before
// registration minted (an older version showed it without minting) routes
// once the minting job has run, without anyone reading it again; a mint
// for a domain deleted meanwhile is ErrDomainGone, which the API answers 404.
func TestReportingAddressMintedWithoutBeingShown(t *testing.T) {
	t.Parallel()
	b, acct, svc, smtpAddr := reportingFixture(t)
	ctx := context.Background()

	for _, d := range []string{"example.com", "example.org", "example.net"} {
		createDomain(t, b, acct.Key, d)
	}
	b.rcvExec(t, `DELETE FROM reporting_addresses WHERE domain_id IN (SELECT id FROM domains WHERE name <> 'example.com' AND account_id = $1)`, acct.ID)
	accountID := uuid.MustParse(acct.ID)
	old := svc.Signer.Address(svc.Signer.Current(reports.KindDMARC, accountID, "example.org"))
	require.Error(t, sendMail(smtpAddr, "noreply-dmarc@receiver.example", []string{old}, reportFor("example.org", "before")),
		"not minted: refused")

	n, err := svc.MintMissing(ctx, b.db, 1) // one domain per batch: the paging is exercised
	require.NoError(t, err)
	require.Equal(t, 2, n, "the two domains without addresses")
	n, err = svc.MintMissing(ctx, b.db, 1)
	require.NoError(t, err)
	require.Zero(t, n, "a second run has nothing to do")
	require.NoError(t, sendMail(smtpAddr, "noreply-dmarc@receiver.example", []string{old}, reportFor("example.org", "after")),
		"the address shown earlier routes now")

	sp, err := b.db.Begin(ctx) // the failed insert aborts only this savepoint
	require.NoError(t, err)
	require.ErrorIs(t, svc.Mint(ctx, sp, accountID, uuid.New(), "gone.example"), reports.ErrDomainGone)
	require.NoError(t, sp.Rollback(ctx))
}

// TestDMARCReportKeepsPassDisposition: an RFC 9990 report's "pass"
// disposition is what the report detail shows (checked against the
// OpenAPI document like every response here), and its messages count as
// passing.
func TestDMARCReportKeepsPassDisposition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"
	raw, err := os.ReadFile("../internal/dmarcrpt/testdata/dmarcbis-pass-disposition.xml")
	require.NoError(t, err)
	b.uploadParsed(t, acct.Key, base+"/reports", "application/xml", raw)

	resp := b.do(t, "GET", base+"/dmarc/reports", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var list []api.DMARCReportSummary
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, int64(50), list[0].Messages)
	require.Equal(t, int64(45), list[0].Passing, "the pass records pass; reject and none do not")

	resp = b.do(t, "GET", base+"/dmarc/reports/"+list[0].ID.String(), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var detail api.DMARCReport
	resp.JSON(t, &detail)
	var dispositions []string
	for _, r := range detail.RecordList {
		dispositions = append(dispositions, r.Disposition)
	}
	require.Equal(t, []string{"pass", "pass", "reject", "none"}, dispositions)
}

// TestFailureReportEnvelopeSender: a failure report without
// Original-Mail-From lists no original_mail_from (the envelope sender is
// unknown) while the reported message's From header is in from.
func TestFailureReportEnvelopeSender(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, "example.com")
	base := "/api/accounts/me/domains/example.com"
	report := "From: dmarc-noreply@receiver.example\r\nTo: ruf@inbound.example\r\nSubject: DMARC failure report\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=feedback-report; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nA message claiming to be from example.com failed DMARC.\r\n" +
		"--b1\r\nContent-Type: message/feedback-report\r\n\r\n" +
		"Feedback-Type: auth-failure\r\nVersion: 1\r\nSource-IP: 192.0.2.7\r\nReported-Domain: example.com\r\nAuth-Failure: dmarc\r\n" +
		"\r\n--b1\r\nContent-Type: text/rfc822-headers\r\n\r\n" +
		"From: Alice <alice@example.com>\r\nTo: bob@receiver.example\r\nSubject: Invoice\r\nMessage-ID: <m1@example.com>\r\n" +
		"\r\n--b1--\r\n"
	b.uploadParsed(t, acct.Key, base+"/reports", "message/rfc822", []byte(report))

	resp := b.do(t, "GET", base+"/dmarc/failure-reports", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var list []map[string]any
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	require.NotContains(t, list[0], "original_mail_from", "no envelope sender given: none shown")
	require.Equal(t, "Alice <alice@example.com>", list[0]["from"])
	require.Equal(t, "192.0.2.7", list[0]["source_ip"])
}
