package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
)

// DNSRecommendation is one recommended RRset change.
type DNSRecommendation struct {
	ID              uuid.UUID  `json:"id" validate:"required"`
	Check           string     `json:"check" validate:"required" description:"The DNS check it comes from (spf, dmarc, mx, tls_rpt, mta_sts, dkim)."`
	Severity        string     `json:"severity" validate:"required" enum:"info,warning,critical"`
	Name            string     `json:"name" validate:"required" description:"Owner name of the RRset."`
	Type            string     `json:"type" validate:"required" description:"Record type (TXT, MX)."`
	Current         []string   `json:"current" validate:"required" description:"The records of this kind observed at the name (for TXT only those of the recommendation's kind, e.g. the SPF record among the apex TXT records; the others are never touched)."`
	Proposed        []string   `json:"proposed" validate:"required" description:"What they become."`
	Op              string     `json:"op" validate:"required" enum:"create,replace_rr,replace_rrset,delete_rr"`
	Why             string     `json:"why" validate:"required"`
	Manual          bool       `json:"manual" validate:"required" description:"Instructions only (e.g. a DKIM key upgrade: the private key is yours); cannot be applied."`
	Fingerprint     string     `json:"fingerprint" validate:"required" description:"Hash of name, type and current; apply refuses (409) when the record changed since."`
	State           string     `json:"state" validate:"required" enum:"open,applying,applied,failed,dismissed"`
	DismissedReason *string    `json:"dismissed_reason" validate:"required"`
	DismissedUntil  *time.Time `json:"dismissed_until" validate:"required"`
	LastError       *string    `json:"last_error" validate:"required" description:"Why the last apply failed (a conflict with the record now held, or the provider's refusal)."`
	JobID           *int64     `json:"job_id" validate:"required" description:"The River job of the last apply."`
	AppliedAt       *time.Time `json:"applied_at" validate:"required"`
	UpdatedAt       time.Time  `json:"updated_at" validate:"required"`
}

func recommendationFromRow(r dbsqlc.DnsRecommendation) DNSRecommendation {
	return DNSRecommendation{
		ID: r.ID, Check: r.CheckName, Severity: r.Severity, Name: r.Name, Type: r.Rtype, Current: nonNil(r.Current), Proposed: nonNil(r.Proposed),
		Op: r.Op, Why: r.Why, Manual: r.Manual, Fingerprint: r.Fingerprint, State: r.State, DismissedReason: r.DismissedReason,
		DismissedUntil: whUTC(r.DismissedUntil), LastError: r.LastError, JobID: r.JobID, AppliedAt: whUTC(r.AppliedAt), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// RecommendationPath names one recommendation of a domain.
type RecommendationPath struct {
	Name string    `path:"domain" json:"-"`
	ID   uuid.UUID `path:"id" format:"uuid"`
}

// ApplyRecommendationRequest is POST .../dns-recommendations/{id}/apply.
type ApplyRecommendationRequest struct {
	Name        string    `path:"domain" json:"-"`
	ID          uuid.UUID `path:"id" format:"uuid"`
	DryRun      *bool     `query:"dry_run" description:"true: read the RRset from the provider now and return the exact update, writing nothing."`
	Fingerprint *string   `json:"fingerprint,omitempty" validate:"omitempty,max=64" description:"The fingerprint you saw; when it is no longer the recommendation's (the record changed), the answer is 409 with the record now held."`
}

// ApplyResult answers an apply: the recommendation (applying, with its
// job) or, for a dry run, the exact update.
type ApplyResult struct {
	Recommendation DNSRecommendation `json:"recommendation" validate:"required"`
	DryRun         bool              `json:"dry_run" validate:"required"`
	JobState       *string           `json:"job_state" validate:"required" description:"State of the queued River job (available, scheduled); null for a dry run."`
	Plan           *dnsfix.Plan      `json:"plan,omitempty" description:"Dry run only: the zone, the compare-and-swap change (current is the whole RRset now held: the update applies only while it is unchanged) and the provider request (rfc2136: the update message; cloudflare: the batch request; route53: the change batch)."`
}

// OpenAPIErrorBody implements the router's hook: the apply route's 409 and
// 422 may carry the record.
func (ApplyResult) OpenAPIErrorBody() any { return new(RecordErrorBody) }

// DismissRecommendationRequest is POST .../dns-recommendations/{id}/dismiss.
type DismissRecommendationRequest struct {
	Name   string     `path:"domain" json:"-"`
	ID     uuid.UUID  `path:"id" format:"uuid"`
	Reason string     `json:"reason" validate:"required,max=500"`
	Until  *time.Time `json:"until,omitempty" description:"Reopen after this time (RFC 3339) even if nothing changed."`
}

func (s *Server) recommendationRoutes() {
	const base = "/api/accounts/me/domains/{domain}/dns-recommendations"
	const tag = "DNS recommendations"
	s.ops.ListDNSRecommendations = Handle(s.router, Endpoint[DomainPath, []DNSRecommendation]{
		Method: "GET", Path: base, OperationID: "listDNSRecommendations", Tag: tag, Errors: []int{404},
		Summary: "Recommended DNS changes for a domain",
		Description: "Computed from the latest known check results after every check. Each is one RRset change with a fingerprint " +
			"of what was observed. A dismissed one reopens when the observed record changes (or its until passes).",
		Call: s.listDNSRecommendations,
	})
	s.ops.ApplyDNSRecommendation = Handle(s.router, Endpoint[ApplyRecommendationRequest, ApplyResult]{
		Method: "POST", Path: base + "/{id}/apply", Status: 202, OperationID: "applyDNSRecommendation", Tag: tag, Errors: []int{404, 409},
		Summary: "Write a recommendation into the domain's zone",
		Description: "Queues a job (in this request's transaction) that writes the change through the domain's linked DNS connection " +
			"as a compare-and-swap (RFC 2136 prerequisites, Cloudflare record ids, Route 53 exact DELETE+CREATE): it applies only " +
			"while the record is what the recommendation saw, then re-checks the domain and emits dns_fix_applied (or dns_fix_failed). " +
			"409: the fingerprint no longer matches (the detail holds the record now), or it is already applying, applied or dismissed. " +
			"422: no DNS connection is linked, or the recommendation is instructions only; the detail holds the record to publish by hand. " +
			"With dry_run=true nothing is queued and plan holds the exact update.",
		Call: s.applyRecommendation,
	})
	s.ops.DismissDNSRecommendation = Handle(s.router, Endpoint[DismissRecommendationRequest, DNSRecommendation]{
		Method: "POST", Path: base + "/{id}/dismiss", OperationID: "dismissDNSRecommendation", Tag: tag, Errors: []int{404, 409},
		Summary: "Dismiss a recommendation", Description: "It stays dismissed until the observed record changes or until passes.",
		Call: func(ctx context.Context, req *DismissRecommendationRequest) (*DNSRecommendation, error) {
			return s.recommendationTx(ctx, req.Name, func(ctx context.Context, tx pgx.Tx, d dbsqlc.Domain) (dbsqlc.DnsRecommendation, error) {
				return dnsfix.Dismiss(ctx, tx, d.ID, req.ID, strings.TrimSpace(req.Reason), req.Until, s.now())
			})
		},
	})
	Handle(s.router, Endpoint[RecommendationPath, DNSRecommendation]{
		Method: "DELETE", Path: base + "/{id}/dismiss", OperationID: "restoreDNSRecommendation", Tag: tag, Errors: []int{404, 409},
		Summary: "Restore a dismissed recommendation",
		Call: func(ctx context.Context, req *RecommendationPath) (*DNSRecommendation, error) {
			return s.recommendationTx(ctx, req.Name, func(ctx context.Context, tx pgx.Tx, d dbsqlc.Domain) (dbsqlc.DnsRecommendation, error) {
				return dnsfix.Restore(ctx, tx, d.ID, req.ID)
			})
		},
	})
}

// listDNSRecommendations serves GET /api/accounts/me/domains/{domain}/dns-recommendations: recommended DNS changes for a domain.
func (s *Server) listDNSRecommendations(ctx context.Context, req *DomainPath) (*[]DNSRecommendation, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.DNSRecommendationListByDomain(ctx, s.db, d.ID)
	if err != nil {
		return nil, err
	}
	out := make([]DNSRecommendation, len(rows))
	for i, r := range rows {
		out[i] = recommendationFromRow(r)
	}
	return &out, nil
}

func (s *Server) recommendationTx(ctx context.Context, domain string, fn func(ctx context.Context, tx pgx.Tx, d dbsqlc.Domain) (dbsqlc.DnsRecommendation, error)) (*DNSRecommendation, error) {
	d, err := s.getDomain(ctx, s.db, domain)
	if err != nil {
		return nil, err
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.DnsRecommendation, error) {
		return fn(ctx, tx, d)
	})
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("recommendation")
	}
	if err != nil {
		return nil, dnsFixError(err)
	}
	out := recommendationFromRow(row)
	return &out, nil
}

// byHand is the 422 for a recommendation mailwatch cannot write.
func byHand(reason string, r dbsqlc.DnsRecommendation) *Error {
	var recs []string
	for _, v := range r.Proposed {
		if r.Rtype == "TXT" {
			v = fmt.Sprintf("%q", v)
		}
		recs = append(recs, fmt.Sprintf("%s. %s %s", r.Name, r.Rtype, v))
	}
	detail := fmt.Sprintf("%s; publish by hand: %s", reason, strings.Join(recs, " and "))
	if old := dnsfix.RecFromRow(r).Remove(); len(old) > 0 {
		detail += fmt.Sprintf(" (replacing %q)", old)
	}
	return &Error{Status: http.StatusUnprocessableEntity, Detail: detail, Record: errorRecord(r, r.Current)}
}

// errorRecord is r's record as an error body's record, holding current.
func errorRecord(r dbsqlc.DnsRecommendation, current []string) *ErrorRecord {
	return &ErrorRecord{Name: r.Name, Type: r.Rtype, Current: nonNil(current), Proposed: nonNil(r.Proposed)}
}

// conflictError is dnsFixError's 409 with the recommendation's record.
func conflictError(r dbsqlc.DnsRecommendation, err error) error {
	out := dnsFixError(err)
	var ce *dnsfix.ConflictError
	var apiErr *Error
	if errors.As(err, &ce) && errors.As(out, &apiErr) {
		apiErr.Record = errorRecord(r, ce.Current)
	}
	return out
}

// applyRecommendation serves POST /api/accounts/me/domains/{domain}/dns-recommendations/{id}/apply: write a recommendation into the domain's zone.
func (s *Server) applyRecommendation(ctx context.Context, req *ApplyRecommendationRequest) (*ApplyResult, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	fp := ""
	if req.Fingerprint != nil {
		fp = *req.Fingerprint
	}
	if req.DryRun != nil && *req.DryRun {
		return s.dryRunRecommendation(ctx, d, req.ID, fp)
	}
	var jobState string
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.DnsRecommendation, error) {
		return dnsfix.StartApply(ctx, tx, d.ID, req.ID, fp, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			res, err := s.deps.River.InsertTx(ctx, tx, domains.FixApplyArgs{RecommendationID: req.ID}, nil)
			if err != nil {
				return 0, fmt.Errorf("error queueing the DNS fix: %w", err)
			}
			jobState = string(res.Job.State)
			return res.Job.ID, nil
		})
	})
	if err != nil {
		return nil, s.applyError(ctx, d, req.ID, err)
	}
	return &ApplyResult{Recommendation: recommendationFromRow(row), JobState: &jobState}, nil
}

func (s *Server) applyError(ctx context.Context, d dbsqlc.Domain, id uuid.UUID, err error) error {
	if errors.Is(err, dnsfix.ErrNotFound) {
		return NotFound("recommendation")
	}
	if errors.Is(err, dnsfix.ErrNoConnection) || errors.Is(err, dnsfix.ErrManual) {
		row, gerr := s.q.DNSRecommendationGetByID(ctx, s.db, id)
		if gerr != nil || row.DomainID != d.ID {
			return NotFound("recommendation")
		}
		reason := "no DNS connection is linked to " + d.Name + " (POST /api/accounts/me/dns-providers/{id}/links)"
		if errors.Is(err, dnsfix.ErrManual) {
			reason = "this recommendation is instructions only (" + row.Why + ")"
		}
		return byHand(reason, row)
	}
	var ce *dnsfix.ConflictError
	if errors.As(err, &ce) {
		if row, gerr := s.q.DNSRecommendationGetByID(ctx, s.db, id); gerr == nil && row.DomainID == d.ID {
			return conflictError(row, err)
		}
	}
	return dnsFixError(err)
}

func (s *Server) dryRunRecommendation(ctx context.Context, d dbsqlc.Domain, id uuid.UUID, fp string) (*ApplyResult, error) {
	env, err := s.dnsFixEnv()
	if err != nil {
		return nil, err
	}
	row, err := s.q.DNSRecommendationGetByID(ctx, s.db, id)
	if dbutil.IsNotFound(err) || (err == nil && row.DomainID != d.ID) {
		return nil, NotFound("recommendation")
	}
	if err != nil {
		return nil, err
	}
	if fp != "" && fp != row.Fingerprint {
		return nil, conflictError(row, &dnsfix.ConflictError{Current: row.Current})
	}
	plan, err := dnsfix.DryRun(ctx, s.db, env, row)
	if err != nil {
		return nil, s.applyError(ctx, d, id, err)
	}
	return &ApplyResult{Recommendation: recommendationFromRow(row), DryRun: true, Plan: plan}, nil
}
