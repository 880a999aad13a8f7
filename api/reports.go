package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/arf"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/reportmail"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

// ReportingAddress is what a domain publishes to receive reports here.
type ReportingAddress struct {
	Domain        string            `json:"domain" validate:"required"`
	Signed        bool              `json:"signed" validate:"required" description:"Whether POST .../reporting-address/sign was called for the current key's addresses: the account receives its reports here, so the DNS check warns when rua does not name the DMARC address and the DNS recommendations merge it in. The addresses shown route either way."`
	KeyID         string            `json:"key_id" validate:"required" description:"Id of the current MAILWATCH_SECRET_KEY."`
	DMARCAddress  string            `json:"dmarc_address" validate:"required" description:"Receives DMARC aggregate (rua) and failure (ruf) reports."`
	TLSRPTAddress string            `json:"tlsrpt_address" validate:"required" description:"Receives SMTP TLS reports (RFC 8460) by mail."`
	TLSRPTPath    string            `json:"tlsrpt_https_path" validate:"required" description:"Path of the HTTPS ingress for TLS reports on this API (an https: rua)."`
	Addresses     []reports.Address `json:"addresses" validate:"required" description:"Every address still accepted: the current key's (always there: minted when the domain was registered, or by this read), then those of previous keys."`
	DMARC         DMARCPublishing   `json:"dmarc" validate:"required"`
	Authorization Authorization     `json:"authorization" validate:"required"`
	TLSRPT        TLSRPTPublishing  `json:"tls_rpt" validate:"required"`
}

// DMARCPublishing says what to publish in the domain's DMARC record.
type DMARCPublishing struct {
	RecordName   string   `json:"record_name" validate:"required" description:"_dmarc.<domain>."`
	CurrentRUA   []string `json:"current_rua" validate:"required" description:"The rua URIs of the record found by the latest DNS check."`
	RUA          string   `json:"rua" validate:"required" description:"The rua value to publish: the existing URIs with ours appended (never replaced)."`
	NamesAddress bool     `json:"names_address" validate:"required" description:"Whether the record found already names one of our addresses."`
}

// Authorization is RFC 7489 section 7.1's external-destination record.
type Authorization struct {
	Name      string `json:"name" validate:"required" description:"<domain>._report._dmarc.<INBOUND_DOMAIN>."`
	Type      string `json:"type" validate:"required"`
	Value     string `json:"value" validate:"required"`
	Published *bool  `json:"published" validate:"required" description:"Whether the record is in DNS now (a live lookup); null when the lookup failed."`
	Error     string `json:"error,omitempty"`
}

// TLSRPTPublishing is the domain's TLS-RPT record (RFC 8460 section 3).
type TLSRPTPublishing struct {
	RecordName   string   `json:"record_name" validate:"required" description:"_smtp._tls.<domain>."`
	CurrentRUA   []string `json:"current_rua" validate:"required"`
	Value        string   `json:"value" validate:"required" description:"The TXT value to publish, existing destinations kept."`
	NamesAddress bool     `json:"names_address" validate:"required"`
}

// UploadReportRequest documents POST .../reports: the body is the report.
type UploadReportRequest struct {
	DomainPath
	Kind string `query:"kind" validate:"omitempty,oneof=dmarc tlsrpt" description:"dmarc (default: aggregate XML, gzip, zip or a report email, or a failure report email) or tlsrpt (JSON, gzip or email)."`
}

// ReceivedReport is a report as received, with its parse outcome.
type ReceivedReport struct {
	ID         uuid.UUID       `json:"id" validate:"required"`
	Kind       string          `json:"kind" validate:"required" enum:"dmarc,tlsrpt"`
	Source     string          `json:"source" validate:"required" enum:"smtp,upload,https"`
	SizeBytes  int             `json:"size_bytes" validate:"required"`
	Status     string          `json:"status" validate:"required" enum:"pending,accepted,duplicate,refused,failed" description:"pending until parsed; refused (acceptance rules) and failed (unparseable) carry a reason."`
	Reason     *string         `json:"reason" validate:"required" description:"Why it was refused or failed; on an accepted aggregate report too wide to spread over its days, the note that it was counted on its midpoint day."`
	RawKept    bool            `json:"raw_kept" validate:"required" description:"Whether a failed report's raw bytes are kept (bounded per domain and by age) for the reparse-reports maintenance task to parse again."`
	ReportType *string         `json:"report_type" validate:"required" description:"What parsing found: aggregate, failure or tls; null until parsed or when unparseable."`
	Failure    json.RawMessage `json:"failure,omitempty" description:"A failure report's identity fields (never the message body)."`
	ReceivedAt time.Time       `json:"received_at" validate:"required"`
	ParsedAt   *time.Time      `json:"parsed_at" validate:"required"`
	JobID      int64           `json:"job_id,omitempty" description:"The River job parsing it (on upload only)."`
}

// ReceivedReportPath names one received report.
type ReceivedReportPath struct {
	DomainPath
	ID uuid.UUID `path:"id" format:"uuid"`
}

// ReportListRequest pages through a domain's reports, newest first.
type ReportListRequest struct {
	DomainPath
	Limit  *int       `query:"limit" validate:"omitempty,min=1,max=200" description:"1 to 200, default 50."`
	Cursor *uuid.UUID `query:"cursor" format:"uuid" description:"X-Next-Cursor of the previous page."`
}

// DMARCReportSummary is one aggregate report in a list.
type DMARCReportSummary struct {
	ID           uuid.UUID `json:"id" validate:"required"`
	OrgName      string    `json:"org_name" validate:"required"`
	ReportID     string    `json:"report_id" validate:"required"`
	Email        string    `json:"email" validate:"required"`
	Begin        time.Time `json:"begin" validate:"required"`
	End          time.Time `json:"end" validate:"required"`
	PolicyDomain string    `json:"policy_domain" validate:"required"`
	Records      int       `json:"records" validate:"required"`
	Messages     int64     `json:"messages" validate:"required"`
	Passing      int64     `json:"passing" validate:"required" description:"Messages passing DMARC (aligned SPF or DKIM)."`
	CreatedAt    time.Time `json:"created_at" validate:"required"`
}

// DMARCReport is an aggregate report with its records.
type DMARCReport struct {
	DMARCReportSummary
	Version    string                   `json:"version" validate:"required"`
	Policy     dmarcrpt.PolicyPublished `json:"policy_published" validate:"required"`
	RecordList []DMARCRecord            `json:"record_list" validate:"required" description:"At most 10,000 records, in report order."`
}

// DMARCRecord is one record (a group of messages) of a report.
type DMARCRecord struct {
	SourceIP     string                    `json:"source_ip" validate:"required"`
	Count        int64                     `json:"count" validate:"required"`
	Disposition  string                    `json:"disposition" validate:"required" description:"What the receiver did with the messages, as reported (lower case): none, quarantine or reject (RFC 7489), or pass (RFC 9990: they passed DMARC, no policy applied). Only quarantine and reject are an enforced policy; whether the messages passed DMARC is dkim and spf."`
	DKIM         string                    `json:"dkim" validate:"required"`
	SPF          string                    `json:"spf" validate:"required"`
	HeaderFrom   string                    `json:"header_from" validate:"required"`
	EnvelopeFrom string                    `json:"envelope_from" validate:"required"`
	EnvelopeTo   string                    `json:"envelope_to" validate:"required"`
	Reasons      []dmarcrpt.Reason         `json:"reasons" validate:"required"`
	DKIMResults  []dmarcrpt.DKIMAuthResult `json:"dkim_results" validate:"required"`
	SPFResults   []dmarcrpt.SPFAuthResult  `json:"spf_results" validate:"required"`
}

// FailureReport is one DMARC failure report (RFC 6591, RFC 9991): its
// identity fields as parsed, never the reported message's body.
type FailureReport struct {
	ID         uuid.UUID `json:"id" validate:"required" description:"The received report (GET .../reports/{id})."`
	Source     string    `json:"source" validate:"required" enum:"smtp,upload"`
	ReceivedAt time.Time `json:"received_at" validate:"required"`
	arf.Report
}

// DMARCReportPath names one aggregate report.
type DMARCReportPath struct {
	DomainPath
	ID uuid.UUID `path:"id" format:"uuid"`
}

// TLSReportSummary is one TLS report in a list.
type TLSReportSummary struct {
	ID                 uuid.UUID `json:"id" validate:"required"`
	OrgName            string    `json:"org_name" validate:"required"`
	ReportID           string    `json:"report_id" validate:"required"`
	ContactInfo        string    `json:"contact_info" validate:"required"`
	Begin              time.Time `json:"begin" validate:"required"`
	End                time.Time `json:"end" validate:"required"`
	SuccessfulSessions int64     `json:"successful_sessions" validate:"required"`
	FailedSessions     int64     `json:"failed_sessions" validate:"required"`
	CreatedAt          time.Time `json:"created_at" validate:"required"`
}

// TLSReport is a TLS report with its policies.
type TLSReport struct {
	TLSReportSummary
	Policies       []tlsrpt.Policy  `json:"policies" validate:"required"`
	FailuresByType map[string]int64 `json:"failures_by_type" validate:"required" description:"Failed sessions summed per result-type over every policy."`
}

// TLSReportPath names one TLS report.
type TLSReportPath struct {
	DomainPath
	ID uuid.UUID `path:"id" format:"uuid"`
}

// TLSRPTIngressRequest documents POST /api/webhooks/tlsrpt/{token}.
type TLSRPTIngressRequest struct {
	Token string `path:"token" description:"The part after tlsrpt+ of the domain's TLS-RPT address."`
}

// IngressAccepted acknowledges a stored report.
type IngressAccepted struct {
	ID     uuid.UUID `json:"id" validate:"required"`
	Status string    `json:"status" validate:"required"`
}

func (s *Server) reportService() *reports.Service {
	return &reports.Service{
		DB: s.db, River: s.deps.River, Emitter: s.deps.Emitter, Resolver: s.deps.Resolver, Logger: s.logger, Now: s.now,
		Signer: &reports.Signer{Keyring: s.deps.Keyring, Domain: s.deps.InboundDomain},
	}
}

// reportTag groups the report routes in the document.
const reportTag = "dmarc and tls reports"

// reportRoutes registers the report routes, in the order of the document.
func (s *Server) reportRoutes() {
	s.reportingAddressRoutes()
	s.receivedReportRoutes()
	s.parsedReportRoutes()
	s.tlsReportIngressRoutes()
	s.dmarcInsightRoutes(s.reportService())
	s.dmarcSubdomainRoutes()
}

// reportingAddressRoutes registers where a domain's reports are to be sent.
func (s *Server) reportingAddressRoutes() {
	Handle(s.router, Endpoint[DomainPath, ReportingAddress]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/reporting-address", OperationID: "getReportingAddress", Tag: reportTag,
		Summary: "The domain's signed reporting addresses and what to publish",
		Description: "The DMARC and TLS-RPT addresses under the current key (dmarc+<key id><mac>@INBOUND_DOMAIN), whether they are " +
			"signed, the rua value to publish merged with the domain's existing rua list, and the external-destination " +
			"authorization record (<domain>._report._dmarc.<INBOUND_DOMAIN> TXT v=DMARC1) with whether it is published (live lookup). " +
			"Every address shown routes: the current key's are minted when the domain is registered, and this read mints them " +
			"for a domain registered earlier or after a key rotation (idempotent; it writes only then).",
		Errors: []int{404},
		Call:   s.getReportingAddress,
	})
	Handle(s.router, Endpoint[DomainPath, ReportingAddress]{
		Method: "POST", Path: "/api/accounts/me/domains/{domain}/reporting-address/sign", OperationID: "signReportingAddress", Tag: reportTag,
		Summary: "Receive the domain's reports here: sign the reporting addresses under the current key",
		Description: "Address signing: marks the domain's DMARC and TLS-RPT addresses under the current MAILWATCH_SECRET_KEY as the " +
			"ones its DNS should name (minting them if needed): the periodic DMARC check then warns when rua does not name the " +
			"DMARC address, and the DNS recommendations merge it into rua and point TLS-RPT at the TLS-RPT address. Routing does " +
			"not wait for it: the addresses route from the domain's registration. Idempotent (the same key gives the same " +
			"addresses). After a key rotation it signs the new addresses; those of previous keys keep working while their key " +
			"is in MAILWATCH_SECRET_KEY_PREVIOUS.",
		Errors: []int{404},
		Call:   s.signReportingAddress,
	})
}

// receivedReportRoutes registers the upload of a report file and the received report it becomes.
func (s *Server) receivedReportRoutes() {
	HandleRaw(s.router, Endpoint[UploadReportRequest, ReceivedReport]{
		Method: "POST", Path: "/api/accounts/me/domains/{domain}/reports", Status: 202, OperationID: "uploadReport", Tag: reportTag,
		Summary: "Upload a report file",
		Description: "The body is one report as a file: aggregate XML, gzip, zip holding one XML, or a report email (.eml); " +
			"with kind=tlsrpt a TLS report as JSON, gzip or email. It is stored and parsed by a job, exactly like a report " +
			"received by mail: follow it with GET .../reports/{id}. 413 over 15 MB (or the server's body limit), 422 empty.",
		Errors: []int{404, 413},
		BodyTypes: []string{"application/octet-stream", "application/xml", "text/xml", "application/gzip", "application/zip",
			"message/rfc822", "application/tlsrpt+json", "application/tlsrpt+gzip"},
	}, s.uploadReport)
	Handle(s.router, Endpoint[ReceivedReportPath, ReceivedReport]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/reports/{id}", OperationID: "getReceivedReport", Tag: reportTag,
		Summary: "A received report and its parse outcome",
		Description: "Status pending until parsed, then accepted, duplicate (acknowledged and ignored), refused or failed with the reason. " +
			"A failed report keeps its raw bytes (raw_kept) for the reparse-reports maintenance task.",
		Errors: []int{404},
		Call:   s.getReceivedReport,
	})
}

// parsedReportRoutes registers the parsed DMARC aggregate, failure and TLS reports.
func (s *Server) parsedReportRoutes() {
	Handle(s.router, Endpoint[ReportListRequest, Page[DMARCReportSummary]]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/reports", OperationID: "listDMARCReports", Tag: reportTag,
		Summary: "A domain's DMARC aggregate reports", Description: "Newest first; page with the X-Next-Cursor header.",
		Errors: []int{404},
		Call:   s.listDMARCReports,
	})
	Handle(s.router, Endpoint[ReportListRequest, Page[FailureReport]]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/failure-reports", OperationID: "listDMARCFailureReports", Tag: reportTag,
		Summary: "A domain's DMARC failure reports",
		Description: "Failure (forensic, ruf) reports accepted for the domain, newest first; page with the X-Next-Cursor header. " +
			"Each carries the identity fields of the report (source IP, reported domain, auth failure, DKIM domain and selector, " +
			"envelope and From, Subject, Message-ID of the reported message), never its body.",
		Errors: []int{404},
		Call:   s.listFailureReports,
	})
	Handle(s.router, Endpoint[DMARCReportPath, DMARCReport]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/reports/{id}", OperationID: "getDMARCReport", Tag: reportTag,
		Summary: "An aggregate report with its records", Errors: []int{404},
		Call: s.getDMARCReport,
	})
	Handle(s.router, Endpoint[ReportListRequest, Page[TLSReportSummary]]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/tls-reports", OperationID: "listTLSReports", Tag: reportTag,
		Summary: "A domain's SMTP TLS reports", Description: "Newest first; page with the X-Next-Cursor header.",
		Errors: []int{404},
		Call:   s.listTLSReports,
	})
	Handle(s.router, Endpoint[TLSReportPath, TLSReport]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/tls-reports/{id}", OperationID: "getTLSReport", Tag: reportTag,
		Summary: "A TLS report with its policies and session counts", Errors: []int{404},
		Call: s.getTLSReport,
	})
}

// tlsReportIngressRoutes registers the HTTPS delivery of TLS reports (RFC 8460).
func (s *Server) tlsReportIngressRoutes() {
	HandleRaw(s.router, Endpoint[TLSRPTIngressRequest, IngressAccepted]{
		Method: "POST", Path: "/api/webhooks/tlsrpt/{token}", Status: 202, OperationID: "ingestTLSReport", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "Receive an SMTP TLS report by HTTPS (RFC 8460 section 5.4)",
		Description: "Publish rua=https://<api host>/api/webhooks/tlsrpt/<token> where token follows tlsrpt+ in the domain's " +
			"TLS-RPT address. The body is the report (application/tlsrpt+json or application/tlsrpt+gzip); it is checked to be a " +
			"TLS report before anything is stored (400 not JSON or gzip, 422 not a TLS report, 413 over a cap), then stored and " +
			"parsed by a job (status pending). A report the domain already received (same organization-name and report-id) is " +
			"acknowledged with the first message's id and status duplicate, and not stored again. 404 for a token that does not " +
			"verify. No API key; limited per client IP with the webhook-ingress budget.",
		Errors:    []int{400, 404, 413, 415, 422},
		BodyTypes: []string{"application/tlsrpt+json", "application/tlsrpt+gzip", "application/json", "application/gzip", "application/octet-stream"},
	}, s.ingestTLSReport)
}

// getReportingAddress serves GET /api/accounts/me/domains/{domain}/reporting-address: the domain's signed reporting addresses and what to publish.
func (s *Server) getReportingAddress(ctx context.Context, req *DomainPath) (*ReportingAddress, error) {
	svc := s.reportService()
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	addrs, err := svc.Shown(ctx, s.db, d.AccountID, d.ID, d.Name)
	if errors.Is(err, reports.ErrDomainGone) {
		return nil, NotFound("domain")
	}
	if err != nil {
		return nil, err
	}
	return s.reportingAddress(ctx, svc, d, addrs), nil
}

// signReportingAddress serves POST /api/accounts/me/domains/{domain}/reporting-address/sign: sign the domain's reporting addresses under the current key.
func (s *Server) signReportingAddress(ctx context.Context, req *DomainPath) (*ReportingAddress, error) {
	svc := s.reportService()
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	addrs, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return svc.Sign(ctx, tx, d.AccountID, d.ID, d.Name)
	})
	if errors.Is(err, reports.ErrDomainGone) {
		return nil, NotFound("domain")
	}
	if err != nil {
		return nil, err
	}
	return s.reportingAddress(ctx, svc, d, addrs), nil
}

// uploadReport serves POST /api/accounts/me/domains/{domain}/reports: upload a report file.
func (s *Server) uploadReport(c *fiber.Ctx) error {
	svc := s.reportService()
	ctx := c.UserContext()
	d, err := s.getDomain(ctx, s.db, c.Params("domain"))
	if err != nil {
		return err
	}
	kind := reports.KindDMARC
	switch k := string(c.Context().QueryArgs().Peek("kind")); k {
	case "", "dmarc":
	case "tlsrpt":
		kind = reports.KindTLSRPT
	default:
		return InvalidField("kind", "must be dmarc or tlsrpt")
	}
	body := c.Body()
	if len(body) > reports.MaxRawBytes {
		return &Error{Status: http.StatusRequestEntityTooLarge, Detail: "report larger than the 15 MB cap"}
	}
	if len(body) == 0 {
		return &Error{Status: http.StatusUnprocessableEntity, Detail: "the body is empty: send the report file as the request body"}
	}
	raw := append([]byte(nil), body...) // Fiber reuses the body buffer
	rec, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (reports.Received, error) {
		return svc.Receive(ctx, tx, reports.Incoming{AccountID: d.AccountID, DomainID: d.ID, Kind: kind, Source: reports.SourceUpload, Raw: raw})
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(ReceivedReport{
		ID: rec.MessageID, Kind: string(kind), Source: reports.SourceUpload, SizeBytes: len(raw),
		Status: reports.StatusPending, ReceivedAt: rec.ReceivedAt.UTC(), JobID: rec.JobID,
	})
}

// getReceivedReport serves GET /api/accounts/me/domains/{domain}/reports/{id}: a received report and its parse outcome.
func (s *Server) getReceivedReport(ctx context.Context, req *ReceivedReportPath) (*ReceivedReport, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	r, err := s.q.ReportMessageGet(ctx, s.db, dbsqlc.ReportMessageGetParams{ID: req.ID, DomainID: d.ID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("report")
	}
	if err != nil {
		return nil, err
	}
	return &ReceivedReport{
		ID: r.ID, Kind: r.Kind, Source: r.Source, SizeBytes: int(r.RawSize), Status: r.Status, Reason: r.Reason,
		RawKept: r.RawKept, ReportType: r.ReportType, Failure: r.Failure, ReceivedAt: r.ReceivedAt.UTC(), ParsedAt: utcPtr(r.ParsedAt),
	}, nil
}

// ingestTLSReport serves POST /api/webhooks/tlsrpt/{token}: receive an SMTP TLS report by HTTPS (RFC 8460 section 5.4).
func (s *Server) ingestTLSReport(c *fiber.Ctx) error {
	svc := s.reportService()
	ctx := c.UserContext()
	t, err := svc.ResolveToken(ctx, s.db, strings.ToLower(c.Params("token")))
	if errors.Is(err, reports.ErrBadAddress) {
		return NotFound("reporting address")
	}
	if err != nil {
		return err
	}
	ct := strings.ToLower(strings.TrimSpace(strings.Split(c.Get(fiber.HeaderContentType), ";")[0]))
	switch ct {
	case "", "application/tlsrpt+json", "application/tlsrpt+gzip", "application/json", "application/gzip", "application/octet-stream":
	default:
		return &Error{Status: http.StatusUnsupportedMediaType, Detail: "the body must be a TLS report: Content-Type application/tlsrpt+json or application/tlsrpt+gzip"}
	}
	body := c.Body()
	if len(body) > reports.MaxRawBytes {
		return &Error{Status: http.StatusRequestEntityTooLarge, Detail: "report larger than the 15 MB cap"}
	}
	if len(body) == 0 {
		return &Error{Status: http.StatusUnprocessableEntity, Detail: "the body is empty: send the TLS report"}
	}
	// Validated before anything is stored: decompressed with the
	// parser's own bound and parsed as a TLS report.
	rep, _, err := tlsrpt.ParseHTTPS(body)
	if err != nil {
		return tlsReportParseError(err)
	}
	raw := append([]byte(nil), body...)
	rec, dup, err := svc.ReceiveTLSReport(ctx, s.db, reports.Incoming{
		AccountID: t.AccountID, DomainID: t.DomainID, Kind: reports.KindTLSRPT, Source: reports.SourceHTTPS, Raw: raw,
	}, rep, s.now())
	if err != nil {
		return err
	}
	if dup {
		return c.Status(http.StatusAccepted).JSON(IngressAccepted{ID: rec.MessageID, Status: reports.StatusDuplicate})
	}
	return c.Status(http.StatusAccepted).JSON(IngressAccepted{ID: rec.MessageID, Status: reports.StatusPending})
}

// tlsReportParseError maps tlsrpt.ParseHTTPS's errors to the answers of
// POST /api/webhooks/tlsrpt/{token}.
func tlsReportParseError(err error) error {
	switch {
	case errors.Is(err, reportmail.ErrDecompressedTooLarge), errors.Is(err, tlsrpt.ErrTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Detail: "the decompressed report is larger than the 20 MB cap"}
	case errors.Is(err, reportmail.ErrBadArchive):
		return BadRequest("the body is not a readable gzip stream")
	case errors.Is(err, tlsrpt.ErrNoReport):
		return BadRequest("the body is neither JSON nor gzip: send the TLS report (RFC 8460) as application/tlsrpt+json or application/tlsrpt+gzip")
	case errors.Is(err, tlsrpt.ErrMalformed):
		return BadRequest("the body is not valid JSON: send the TLS report (RFC 8460) as application/tlsrpt+json or application/tlsrpt+gzip")
	case errors.Is(err, tlsrpt.ErrInvalid), errors.Is(err, tlsrpt.ErrEmpty):
		return &Error{Status: http.StatusUnprocessableEntity, Detail: "not a TLS report (RFC 8460): " + strings.TrimPrefix(err.Error(), "invalid TLS report: ")}
	}
	return err
}

// reportingAddress shows the publishing instructions of a domain
// (reports.Service.Instructions).
func (s *Server) reportingAddress(ctx context.Context, svc *reports.Service, d dbsqlc.Domain, minted []reports.Address) *ReportingAddress {
	in := svc.Instructions(ctx, d, minted)
	out := &ReportingAddress{
		Domain: in.Domain, Signed: in.Signed, KeyID: in.KeyID, DMARCAddress: in.DMARCAddress, TLSRPTAddress: in.TLSRPTAddress,
		TLSRPTPath: in.TLSRPTPath, Addresses: in.Addresses,
		DMARC: DMARCPublishing{RecordName: in.DMARC.RecordName, CurrentRUA: in.DMARC.CurrentRUA, RUA: in.DMARC.Value,
			NamesAddress: in.DMARC.NamesAddress},
		TLSRPT: TLSRPTPublishing{RecordName: in.TLSRPT.RecordName, CurrentRUA: in.TLSRPT.CurrentRUA, Value: in.TLSRPT.Value,
			NamesAddress: in.TLSRPT.NamesAddress},
		Authorization: Authorization{Name: in.Authorization.Name, Type: in.Authorization.Type, Value: in.Authorization.Value,
			Published: in.Authorization.Published},
	}
	if in.Authorization.LookupErr != nil {
		out.Authorization.Error = "DNS lookup failed; try again"
	}
	return out
}

// listDMARCReports serves GET /api/accounts/me/domains/{domain}/dmarc/reports: a domain's DMARC aggregate reports.
func (s *Server) listDMARCReports(ctx context.Context, req *ReportListRequest) (*Page[DMARCReportSummary], error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := s.q.DMARCReportList(ctx, s.db, dbsqlc.DMARCReportListParams{DomainID: d.ID, Before: req.Cursor, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := newPage(make([]DMARCReportSummary, len(rows)), domainListPath(d.Name, "dmarc/reports"), limitQuery(limit))
	for i, r := range rows {
		out.Items[i] = DMARCReportSummary{
			ID: r.ID, OrgName: r.OrgName, ReportID: r.ReportID, Email: r.Email, Begin: r.BeginAt.UTC(), End: r.EndAt.UTC(),
			PolicyDomain: r.PolicyDomain, Records: int(r.RecordCount), Messages: r.MessageCount, Passing: r.PassCount,
			CreatedAt: r.CreatedAt.UTC(),
		}
	}
	out.setNextIfFull(limit, func() string { return rows[len(rows)-1].ID.String() })
	return out, nil
}

// listFailureReports serves GET /api/accounts/me/domains/{domain}/dmarc/failure-reports: a domain's DMARC failure reports.
func (s *Server) listFailureReports(ctx context.Context, req *ReportListRequest) (*Page[FailureReport], error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := s.q.ReportFailureList(ctx, s.db, dbsqlc.ReportFailureListParams{DomainID: d.ID, Before: req.Cursor, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := newPage(make([]FailureReport, len(rows)), domainListPath(d.Name, "dmarc/failure-reports"), limitQuery(limit))
	for i, r := range rows {
		out.Items[i] = FailureReport{ID: r.ID, Source: r.Source, ReceivedAt: r.ReceivedAt.UTC()}
		if len(r.Failure) > 0 {
			if err := json.Unmarshal(r.Failure, &out.Items[i].Report); err != nil {
				return nil, err
			}
		}
	}
	out.setNextIfFull(limit, func() string { return rows[len(rows)-1].ID.String() })
	return out, nil
}

// maxRecordsShown caps the records a report detail returns.
const maxRecordsShown = 10000

// getDMARCReport serves GET /api/accounts/me/domains/{domain}/dmarc/reports/{id}: an aggregate report with its records.
func (s *Server) getDMARCReport(ctx context.Context, req *DMARCReportPath) (*DMARCReport, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	r, err := s.q.DMARCReportGet(ctx, s.db, dbsqlc.DMARCReportGetParams{ID: req.ID, DomainID: d.ID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("report")
	}
	if err != nil {
		return nil, err
	}
	recs, err := s.q.DMARCRecordList(ctx, s.db, dbsqlc.DMARCRecordListParams{ReportID: r.ID, MaxRows: maxRecordsShown})
	if err != nil {
		return nil, err
	}
	out := &DMARCReport{
		DMARCReportSummary: DMARCReportSummary{
			ID: r.ID, OrgName: r.OrgName, ReportID: r.ReportID, Email: r.Email, Begin: r.BeginAt.UTC(), End: r.EndAt.UTC(),
			PolicyDomain: r.PolicyDomain, Records: int(r.RecordCount), Messages: r.MessageCount, Passing: r.PassCount,
			CreatedAt: r.CreatedAt.UTC(),
		},
		Version:    r.Version,
		RecordList: make([]DMARCRecord, len(recs)),
	}
	_ = json.Unmarshal(r.Policy, &out.Policy)
	for i, x := range recs {
		rec := DMARCRecord{
			SourceIP: x.SourceIp, Count: x.Count, Disposition: x.Disposition, DKIM: x.Dkim, SPF: x.Spf,
			HeaderFrom: x.HeaderFrom, EnvelopeFrom: x.EnvelopeFrom, EnvelopeTo: x.EnvelopeTo,
			Reasons: []dmarcrpt.Reason{}, DKIMResults: []dmarcrpt.DKIMAuthResult{}, SPFResults: []dmarcrpt.SPFAuthResult{},
		}
		_ = json.Unmarshal(x.Reasons, &rec.Reasons)
		_ = json.Unmarshal(x.DkimResults, &rec.DKIMResults)
		_ = json.Unmarshal(x.SpfResults, &rec.SPFResults)
		out.RecordList[i] = rec
	}
	return out, nil
}

// listTLSReports serves GET /api/accounts/me/domains/{domain}/tls-reports: a domain's SMTP TLS reports.
func (s *Server) listTLSReports(ctx context.Context, req *ReportListRequest) (*Page[TLSReportSummary], error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := s.q.TLSReportList(ctx, s.db, dbsqlc.TLSReportListParams{DomainID: d.ID, Before: req.Cursor, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := newPage(make([]TLSReportSummary, len(rows)), domainListPath(d.Name, "tls-reports"), limitQuery(limit))
	for i, r := range rows {
		out.Items[i] = TLSReportSummary{
			ID: r.ID, OrgName: r.OrgName, ReportID: r.ReportID, ContactInfo: r.ContactInfo, Begin: r.BeginAt.UTC(), End: r.EndAt.UTC(),
			SuccessfulSessions: r.SuccessfulCount, FailedSessions: r.FailureCount, CreatedAt: r.CreatedAt.UTC(),
		}
	}
	out.setNextIfFull(limit, func() string { return rows[len(rows)-1].ID.String() })
	return out, nil
}

// getTLSReport serves GET /api/accounts/me/domains/{domain}/tls-reports/{id}: a TLS report with its policies and session counts.
func (s *Server) getTLSReport(ctx context.Context, req *TLSReportPath) (*TLSReport, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	r, err := s.q.TLSReportGet(ctx, s.db, dbsqlc.TLSReportGetParams{ID: req.ID, DomainID: d.ID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("report")
	}
	if err != nil {
		return nil, err
	}
	out := &TLSReport{
		TLSReportSummary: TLSReportSummary{
			ID: r.ID, OrgName: r.OrgName, ReportID: r.ReportID, ContactInfo: r.ContactInfo, Begin: r.BeginAt.UTC(), End: r.EndAt.UTC(),
			SuccessfulSessions: r.SuccessfulCount, FailedSessions: r.FailureCount, CreatedAt: r.CreatedAt.UTC(),
		},
		Policies:       []tlsrpt.Policy{},
		FailuresByType: map[string]int64{},
	}
	_ = json.Unmarshal(r.Policies, &out.Policies)
	for _, p := range out.Policies {
		for _, f := range p.FailureDetails {
			out.FailuresByType[f.ResultType] += f.FailedSessionCount
		}
	}
	return out, nil
}

// DashboardReports counts the DMARC and TLS reports of the last 30 days.
type DashboardReports struct {
	DMARCReports30d  int64    `json:"dmarc_reports_last_30d" validate:"required"`
	DMARCMessages30d int64    `json:"dmarc_messages_last_30d" validate:"required" description:"Messages covered by those reports."`
	DMARCPassRate30d *float64 `json:"dmarc_pass_rate_last_30d" validate:"required" description:"Share (0..1) of those messages passing DMARC; null without any."`
	TLSReports30d    int64    `json:"tls_reports_last_30d" validate:"required"`
	Unusable30d      int64    `json:"unusable_last_30d" validate:"required" description:"Reports refused or unparseable (see each one's reason)."`
}

func (s *Server) fillDashboardReports(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	r, err := s.q.ReportDashboard(ctx, s.db, dbsqlc.ReportDashboardParams{AccountID: account, Since: s.now().Add(-reports.ReadinessWindow)})
	if err != nil {
		return err
	}
	out.Reports = DashboardReports{
		DMARCReports30d: r.DmarcReports, DMARCMessages30d: r.DmarcMessages, TLSReports30d: r.TlsReports, Unusable30d: r.Unusable,
	}
	if r.DmarcMessages > 0 {
		rate := float64(r.DmarcPassing) / float64(r.DmarcMessages)
		out.Reports.DMARCPassRate30d = &rate
	}
	return nil
}
