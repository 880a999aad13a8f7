package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/arf"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/selectors"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

// Statuses of a received report.
const (
	StatusPending   = "pending"
	StatusAccepted  = "accepted"
	StatusDuplicate = "duplicate"
	StatusRefused   = "refused"
	StatusFailed    = "failed"
)

// Report types found by parsing.
const (
	TypeAggregate = "aggregate"
	TypeFailure   = "failure"
	TypeTLS       = "tls"
)

// Acceptance limits of a report's date range.
const (
	// maxClockSkew is how far in the future a range may end (reporters'
	// clocks drift).
	maxClockSkew = time.Hour
	// maxRange is the longest range accepted; RFC 7489 asks for daily
	// reports and longer ones are rare, longer than a month absurd.
	maxRange = 31 * 24 * time.Hour
	// newSourceFloor is the volume from which an unknown source failing
	// DMARC is announced with dmarc_new_source.
	newSourceFloor = 10
	// maxNewSourceEvents caps dmarc_new_source events per report.
	maxNewSourceEvents = 20
)

// ErrNotFound is returned by Parse for a message that no longer exists
// (its domain was deleted): nothing to do, ever.
var ErrNotFound = errors.New("report message not found")

// Outcome is what a parse did.
type Outcome struct {
	Status     string
	Reason     string
	ReportType string
	// ReportID is the stored dmarc_reports or tls_reports row.
	ReportID uuid.UUID
	// Already is true when the message had been parsed by an earlier run.
	Already bool
	// RawKept is true when the raw bytes were kept: a failed report within
	// MaxFailedRawBytesPerDomain, for the reparse-reports task.
	RawKept bool
}

// refusal is a permanent, user-visible reason a report is not kept.
type refusal struct {
	status string
	reason string
}

func (r *refusal) Error() string { return r.reason }

func refused(format string, args ...any) error {
	return &refusal{status: StatusRefused, reason: fmt.Sprintf(format, args...)}
}

func failed(err error) error { return &refusal{status: StatusFailed, reason: err.Error()} }

// Parse parses one received report and stores the outcome. It is
// idempotent: a message already parsed is left as it is. Permanent
// problems (unparseable, for another domain, absurd range) end in a stored
// status with its reason and a nil error; only transient errors (the
// database) are returned, for the job to retry.
func (s *Service) Parse(ctx context.Context, messageID uuid.UUID) (Outcome, error) {
	// Read and parse outside the writing transaction: the write locks the
	// row and checks again that it is still pending.
	var raw []byte
	var msg dbsqlc.ReportMessageGetForUpdateRow
	err := dbutil.WithTx(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		msg, err = q.ReportMessageGetForUpdate(ctx, tx, messageID)
		raw = msg.Raw
		return err
	})
	if dbutil.IsNotFound(err) {
		return Outcome{}, ErrNotFound
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("error reading report message: %w", err)
	}
	if msg.Status != StatusPending {
		return Outcome{Status: msg.Status, Already: true}, nil
	}

	var parsed parsedReport
	switch Kind(msg.Kind) {
	case KindTLSRPT:
		parsed = s.parseTLS(raw, msg.DomainName)
	default:
		parsed = s.parseDMARC(raw, msg.DomainName)
	}
	if parsed.agg != nil && parsed.err == nil {
		parsed.groups = classify(parsed.agg, msg.DomainName)
		parsed.bySeverity = sortedByFailing(parsed.groups)
		// Most failing volume first, then most volume: reverse DNS is
		// resolved in this order (bounded by maxPTRLookups), so the
		// sources that matter most are named.
		parsed.ptrs = s.resolvePTRs(ctx, parsed.bySeverity)
	}

	return dbutil.WithTxV(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) (Outcome, error) {
		cur, err := q.ReportMessageGetForUpdate(ctx, tx, messageID)
		if dbutil.IsNotFound(err) {
			return Outcome{}, ErrNotFound
		}
		if err != nil {
			return Outcome{}, err
		}
		if cur.Status != StatusPending {
			return Outcome{Status: cur.Status, Already: true}, nil
		}
		out, err := s.store(ctx, tx, &cur, &parsed)
		var ref *refusal
		if errors.As(err, &ref) {
			out = Outcome{Status: ref.status, Reason: ref.reason, ReportType: parsed.reportType}
		} else if err != nil {
			return Outcome{}, err
		}
		var failure json.RawMessage
		if parsed.failure != nil && out.Status == StatusAccepted {
			failure, _ = json.Marshal(parsed.failure)
		}
		out.RawKept, err = q.ReportMessageFinish(ctx, tx, dbsqlc.ReportMessageFinishParams{
			ID: messageID, Status: out.Status, Reason: nilIfEmpty(clipReason(out.Reason)),
			ReportType: nilIfEmpty(out.ReportType), Failure: failure, MaxKeptBytes: MaxFailedRawBytesPerDomain,
		})
		if err != nil {
			return Outcome{}, fmt.Errorf("error finishing report message: %w", err)
		}
		return out, nil
	})
}

type parsedReport struct {
	reportType string
	agg        *dmarcrpt.Feedback
	failure    *arf.Report
	tls        *tlsrpt.Report
	err        error // a refusal
	// An aggregate report's records summed per source IP, and its source
	// IPs most failing first.
	groups     map[string]*group
	bySeverity []string
	ptrs       map[string]string
}

func (s *Service) parseDMARC(raw []byte, domain string) parsedReport {
	f, _, err := dmarcrpt.ParseFile(raw)
	if err == nil {
		p := parsedReport{reportType: TypeAggregate, agg: f}
		p.err = s.acceptRange(f.ReportMetadata.Begin, f.ReportMetadata.End)
		if p.err == nil && !domainMatches(f.PolicyPublished.Domain, domain) {
			p.err = refused("the report is for %s, not %s", f.PolicyPublished.Domain, domain)
		}
		return p
	}
	// Failure reports (ruf) arrive at the same address.
	if r, ferr := arf.ParseMessage(raw); ferr == nil {
		p := parsedReport{reportType: TypeFailure, failure: r}
		if r.ReportedDomain != "" && !domainMatches(r.ReportedDomain, domain) {
			p.err = refused("the failure report is for %s, not %s", r.ReportedDomain, domain)
		}
		return p
	}
	return parsedReport{err: failed(err)}
}

func (s *Service) parseTLS(raw []byte, domain string) parsedReport {
	r, _, err := tlsrpt.ParseFile(raw)
	if err != nil {
		return parsedReport{err: failed(err)}
	}
	p := parsedReport{reportType: TypeTLS, tls: r}
	p.err = s.acceptRange(r.DateRange.Start, r.DateRange.End)
	for _, pol := range r.Policies {
		if p.err == nil && !domainMatches(pol.Policy.Domain, domain) {
			p.err = refused("the report's policy is for %s, not %s", pol.Policy.Domain, domain)
		}
	}
	return p
}

// acceptRange refuses a range that ends in the future, ends before it
// begins or spans more than maxRange.
func (s *Service) acceptRange(begin, end time.Time) error {
	now := s.now()
	switch {
	case end.Before(begin):
		return refused("the date range ends (%s) before it begins (%s)", end.UTC().Format(time.RFC3339), begin.UTC().Format(time.RFC3339))
	case end.After(now.Add(maxClockSkew)):
		return refused("the date range ends in the future (%s)", end.UTC().Format(time.RFC3339))
	case end.Sub(begin) > maxRange:
		return refused("the date range spans %.0f days, more than %.0f", end.Sub(begin).Hours()/24, maxRange.Hours()/24)
	}
	return nil
}

// domainMatches reports whether reported is domain or one of its
// subdomains.
func domainMatches(reported, domain string) bool {
	reported = strings.TrimSuffix(strings.ToLower(reported), ".")
	return reported == domain || strings.HasSuffix(reported, "."+domain)
}

func (s *Service) store(ctx context.Context, tx pgx.Tx, msg *dbsqlc.ReportMessageGetForUpdateRow, p *parsedReport) (Outcome, error) {
	if p.err != nil {
		return Outcome{}, p.err
	}
	switch {
	case p.agg != nil:
		return s.storeAggregate(ctx, tx, msg, p)
	case p.tls != nil:
		return s.storeTLS(ctx, tx, msg, p.tls)
	case p.failure != nil:
		if err := s.noteFailure(ctx, tx, s.emitter(), msg, p.failure); err != nil {
			return Outcome{}, err
		}
		return Outcome{Status: StatusAccepted, ReportType: TypeFailure}, nil
	}
	return Outcome{}, failed(errors.New("no report found"))
}

func (s *Service) storeAggregate(ctx context.Context, tx pgx.Tx, msg *dbsqlc.ReportMessageGetForUpdateRow, p *parsedReport) (Outcome, error) {
	f := p.agg
	groups := p.groups
	var pass int64
	for _, g := range groups {
		pass += g.compliant + g.forwarded
	}
	policy, err := json.Marshal(f.PolicyPublished)
	if err != nil {
		return Outcome{}, err
	}
	id, err := q.DMARCReportInsert(ctx, tx, dbsqlc.DMARCReportInsertParams{
		ID: uuid.Must(uuid.NewV7()), DomainID: msg.DomainID, MessageID: msg.ID,
		OrgName: f.ReportMetadata.OrgName, ReportID: f.ReportMetadata.ReportID, Email: f.ReportMetadata.Email,
		BeginAt: f.ReportMetadata.Begin, EndAt: f.ReportMetadata.End, PolicyDomain: f.PolicyPublished.Domain,
		Policy: policy, Version: f.Version, RecordCount: int32(len(f.Records)), MessageCount: f.MessageCount(), PassCount: pass,
	})
	if dbutil.IsNotFound(err) {
		return Outcome{Status: StatusDuplicate, ReportType: TypeAggregate,
			Reason: fmt.Sprintf("report %q of %q was already received", f.ReportMetadata.ReportID, f.ReportMetadata.OrgName)}, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("error storing DMARC report: %w", err)
	}
	if err := copyRecords(ctx, tx, id, f.Records); err != nil {
		return Outcome{}, err
	}

	// Sources new to the domain (dmarc_new_source), asked before the
	// aggregates include this report.
	candidates, seen, err := newSourceCandidates(ctx, tx, msg.DomainID, p)
	if err != nil {
		return Outcome{}, err
	}
	days, note := spreadDays(f.ReportMetadata.Begin, f.ReportMetadata.End, len(groups))
	if err := addDays(ctx, tx, msg.DomainID, days, groups); err != nil {
		return Outcome{}, err
	}
	if err := addDomainDays(ctx, tx, msg.DomainID, days, groups, p.ptrs); err != nil {
		return Outcome{}, err
	}
	if err := addAuthDomains(ctx, tx, msg.DomainID, days, AuthDomains(f.Records)); err != nil {
		return Outcome{}, err
	}
	subdomains, err := addHeaderFroms(ctx, tx, msg.DomainID, msg.DomainName, days, HeaderFroms(f.Records, msg.DomainName))
	if err != nil {
		return Outcome{}, err
	}
	if subdomains.subdomains {
		if err := s.queueSubdomainLookup(ctx, tx, msg.DomainID, msg.DomainName); err != nil {
			return Outcome{}, err
		}
	}

	if err := s.queueSummary(ctx, tx, msg.DomainID); err != nil {
		return Outcome{}, err
	}
	if s.AfterAggregate != nil {
		if err := s.AfterAggregate(ctx, tx, msg.DomainID); err != nil {
			return Outcome{}, err
		}
	}
	emitter := s.emitter()
	var rate float64
	if n := f.MessageCount(); n > 0 {
		rate = float64(pass) / float64(n)
	}
	if _, err := emitter.Emit(ctx, tx, events.Event{
		AccountID: msg.AccountID, Type: events.TypeDMARCReportReceived, Domain: msg.DomainName, Tags: msg.DomainTags,
		Payload: map[string]any{
			"domain": msg.DomainName, "org_name": f.ReportMetadata.OrgName, "report_id": f.ReportMetadata.ReportID,
			"begin": f.ReportMetadata.Begin, "end": f.ReportMetadata.End, "messages": f.MessageCount(), "pass_rate": rate,
			"records": len(f.Records), "dmarc_report_id": id,
		},
	}); err != nil {
		return Outcome{}, err
	}
	if err := emitNewSources(ctx, tx, emitter, msg, p, candidates, seen); err != nil {
		return Outcome{}, err
	}
	if err := s.noteReporter(ctx, tx, emitter, msg, f.ReportMetadata.OrgName); err != nil {
		return Outcome{}, err
	}
	if err := selectors.SeenInReport(ctx, tx, emitter, selectors.Domain{ID: msg.DomainID, AccountID: msg.AccountID,
		Name: msg.DomainName, Tags: msg.DomainTags}, selectorUses(p), s.now()); err != nil {
		return Outcome{}, err
	}
	if err := emitNewSubdomains(ctx, tx, emitter, msg, f, days[0], subdomains); err != nil {
		return Outcome{}, err
	}
	return Outcome{Status: StatusAccepted, ReportType: TypeAggregate, ReportID: id, Reason: note}, nil
}

// newSourceCandidates lists the sources of report p that may be new to the
// domain, for dmarc_new_source, and which of them it has seen before. Only
// sources failing enough to be announced are asked about, the most failing
// first and at most as many as have their PTR resolved.
func newSourceCandidates(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, p *parsedReport) ([]string, map[string]bool, error) {
	var candidates []string
	for _, ip := range p.bySeverity {
		if p.groups[ip].failing < newSourceFloor || len(candidates) == maxPTRLookups {
			break
		}
		candidates = append(candidates, ip)
	}
	seen := map[string]bool{}
	if len(candidates) > 0 {
		seenList, err := q.DMARCSourcesSeen(ctx, tx, dbsqlc.DMARCSourcesSeenParams{DomainID: domainID, SourceIps: candidates})
		if err != nil {
			return nil, nil, fmt.Errorf("error reading known sources: %w", err)
		}
		for _, ip := range seenList {
			seen[ip] = true
		}
	}
	return candidates, seen, nil
}

// emitNewSources emits dmarc_new_source for the candidates not seen before
// that no known sender explains, at most maxNewSourceEvents.
func emitNewSources(ctx context.Context, tx pgx.Tx, emitter *events.Emitter, msg *dbsqlc.ReportMessageGetForUpdateRow,
	p *parsedReport, candidates []string, seen map[string]bool) error {
	f := p.agg
	emitted := 0
	for _, ip := range candidates {
		g := p.groups[ip]
		if emitted >= maxNewSourceEvents {
			break
		}
		if seen[ip] {
			continue
		}
		src := identify(ip, p.ptrs)
		if src.Sender != nil {
			continue // a known sender failing is guidance, not a threat
		}
		emitted++
		if _, err := emitter.Emit(ctx, tx, events.Event{
			AccountID: msg.AccountID, Type: TypeDMARCNewSource, Domain: msg.DomainName, Tags: msg.DomainTags,
			Payload: map[string]any{
				"domain": msg.DomainName, "source_ip": ip, "ptr": src.PTR, "base_domain": src.BaseDomain,
				"messages": g.messages, "failing": g.failing, "category": CategoryThreatUnknown,
				"org_name": f.ReportMetadata.OrgName, "report_id": f.ReportMetadata.ReportID,
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// Event type names this package emits (registered in internal/events).
const (
	TypeDMARCNewSource    = events.TypeDMARCNewSource
	TypeTLSReportReceived = events.TypeTLSReportReceived
	TypeTLSReportFailures = events.TypeTLSReportFailures
)

// copyRecords writes a report's records with COPY: one round trip for the
// 2,286 records of a large report. Rows are made as COPY reads them, so
// only the records themselves are held.
func copyRecords(ctx context.Context, tx pgx.Tx, reportID uuid.UUID, records []dmarcrpt.Record) error {
	i := 0
	next := func() ([]any, error) {
		if i == len(records) {
			return nil, nil
		}
		r := &records[i]
		i++
		reasons, _ := json.Marshal(nonNil(r.Reasons))
		dkim, _ := json.Marshal(nonNil(r.DKIMResults))
		spf, _ := json.Marshal(nonNil(r.SPFResults))
		return []any{reportID, int32(i), r.SourceIP, r.Count, r.Disposition, r.DKIM, r.SPF,
			r.HeaderFrom, r.EnvelopeFrom, r.EnvelopeTo, string(reasons), string(dkim), string(spf)}, nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"dmarc_records"},
		[]string{"report_id", "ordinal", "source_ip", "count", "disposition", "dkim", "spf",
			"header_from", "envelope_from", "envelope_to", "reasons", "dkim_results", "spf_results"},
		pgx.CopyFromFunc(next))
	if err != nil {
		return fmt.Errorf("error copying DMARC records: %w", err)
	}
	return nil
}

func (s *Service) storeTLS(ctx context.Context, tx pgx.Tx, msg *dbsqlc.ReportMessageGetForUpdateRow, r *tlsrpt.Report) (Outcome, error) {
	ok, failedSessions := r.Totals()
	policies, err := json.Marshal(r.Policies)
	if err != nil {
		return Outcome{}, err
	}
	id, err := q.TLSReportInsert(ctx, tx, dbsqlc.TLSReportInsertParams{
		ID: uuid.Must(uuid.NewV7()), DomainID: msg.DomainID, MessageID: msg.ID,
		OrgName: r.OrganizationName, ReportID: r.ReportID, ContactInfo: r.ContactInfo,
		BeginAt: r.DateRange.Start, EndAt: r.DateRange.End, SuccessfulCount: ok, FailureCount: failedSessions, Policies: policies,
	})
	if dbutil.IsNotFound(err) {
		return Outcome{Status: StatusDuplicate, ReportType: TypeTLS,
			Reason: fmt.Sprintf("report %q of %q was already received", r.ReportID, r.OrganizationName)}, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("error storing TLS report: %w", err)
	}
	emitter := s.emitter()
	payload := map[string]any{
		"domain": msg.DomainName, "org_name": r.OrganizationName, "report_id": r.ReportID,
		"begin": r.DateRange.Start, "end": r.DateRange.End, "successful_sessions": ok, "failed_sessions": failedSessions,
		"tls_report_id": id,
	}
	if _, err := emitter.Emit(ctx, tx, events.Event{
		AccountID: msg.AccountID, Type: TypeTLSReportReceived, Domain: msg.DomainName, Tags: msg.DomainTags, Payload: payload,
	}); err != nil {
		return Outcome{}, err
	}
	if failedSessions > 0 {
		byType := map[string]int64{}
		for _, p := range r.Policies {
			for _, d := range p.FailureDetails {
				byType[d.ResultType] += d.FailedSessionCount
			}
		}
		payload["failures_by_type"] = byType
		if _, err := emitter.Emit(ctx, tx, events.Event{
			AccountID: msg.AccountID, Type: TypeTLSReportFailures, Domain: msg.DomainName, Tags: msg.DomainTags, Payload: payload,
		}); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{Status: StatusAccepted, ReportType: TypeTLS, ReportID: id}, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func clipReason(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// emitter is the Service's Emitter, or one that takes its River client
// from the context (inside a worker).
func (s *Service) emitter() *events.Emitter {
	if s.Emitter != nil {
		return s.Emitter
	}
	return &events.Emitter{}
}
