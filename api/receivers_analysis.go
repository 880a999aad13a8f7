package api

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

// Assertion wait bounds (docs/features/deliverability.md).
const (
	assertDefaultTimeout = 10
	assertMaxTimeout     = 30
)

// MessageAnalysis is the deliverability analysis of a message: its status
// and, once done, the full report.
type MessageAnalysis struct {
	Status string `json:"status" validate:"required,oneof=pending done not_applicable" description:"pending until the analysis job has run; done with the report; not_applicable for a message that did not arrive over SMTP (ingress webhook, SMS), with the reason."`
	Reason string `json:"reason,omitempty" description:"Why the analysis is not applicable."`
	// AnalyzedAt is when the report was stored.
	AnalyzedAt *time.Time `json:"analyzed_at,omitempty" description:"When the report was stored (done only)."`
	*deliverability.Report
}

// MessageAnalysisSummary is what message listings show of the analysis.
type MessageAnalysisSummary struct {
	Status string `json:"status" validate:"required,oneof=pending done not_applicable" description:"As in GET .../analysis."`
	Reason string `json:"reason,omitempty" description:"Why the analysis is not applicable."`
	Grade  string `json:"grade,omitempty" validate:"omitempty,oneof=A B C D F" description:"A to F (done only)."`
	Score  *int   `json:"score,omitempty" description:"0 to 100 (done only)."`
	SPF    string `json:"spf,omitempty" description:"SPF result for MAIL FROM (done only)."`
	DKIM   string `json:"dkim,omitempty" description:"pass when any DKIM signature verifies, none without one (done only)."`
	DMARC  string `json:"dmarc,omitempty" description:"DMARC result for the From domain (done only)."`
}

func analysisSummaryOf(a receivers.AnalysisSummary) *MessageAnalysisSummary {
	out := &MessageAnalysisSummary{Status: a.Status, Reason: a.Reason, Score: a.Score}
	if a.Grade != nil {
		out.Grade = *a.Grade
	}
	if a.Verdicts != nil {
		out.SPF, out.DKIM, out.DMARC = a.Verdicts.SPF, a.Verdicts.DKIM, a.Verdicts.DMARC
	}
	return out
}

// AssertionInput is one assertion of POST .../assertions.
type AssertionInput struct {
	Type  string   `json:"type" validate:"required,max=64" description:"spf_pass, dkim_pass, dmarc_pass, spam_score_at_most, not_blocklisted, header_equals, header_contains, header_absent, one_click_unsubscribe, link_count_at_most, link_count_at_least, size_at_most or grade_at_least. An unknown type is a failed result, not an error."`
	Name  string   `json:"name,omitempty" validate:"max=200" description:"The header field name (header_equals, header_contains, header_absent); case-insensitive."`
	Value string   `json:"value,omitempty" validate:"max=1000" description:"The expected header value (header_equals: equal after trimming surrounding spaces; header_contains: a substring), or the lowest grade accepted (grade_at_least)."`
	Limit *float64 `json:"limit,omitempty" validate:"omitempty,min=0,max=1000000000" description:"The bound of spam_score_at_most, link_count_at_most, link_count_at_least and size_at_most (bytes)."`
}

// AssertRequest is POST .../messages/{message_id}/assertions.
type AssertRequest struct {
	ID         uuid.UUID        `path:"id" format:"uuid"`
	MessageID  uuid.UUID        `path:"message_id" format:"uuid"`
	Assertions []AssertionInput `json:"assertions" validate:"required,min=1,max=50,dive" description:"1 to 50 assertions."`
	Timeout    *int             `json:"timeout,omitempty" validate:"omitempty,min=0,max=30" description:"Seconds to wait for a pending analysis, 0 to 30; default 10."`
}

// AssertionResult is the outcome of one assertion.
type AssertionResult struct {
	Type   string `json:"type" validate:"required"`
	Pass   bool   `json:"pass" validate:"required"`
	Reason string `json:"reason" validate:"required" description:"Why the assertion failed; empty when it passed."`
	Actual string `json:"actual" validate:"required" description:"What was found (a verdict, a header value, a count, a grade); empty when nothing was."`
}

// AssertResponse is the answer of POST .../assertions.
type AssertResponse struct {
	Pass           bool              `json:"pass" validate:"required" description:"True when every assertion passed."`
	AnalysisStatus string            `json:"analysis_status" validate:"required,oneof=pending done not_applicable" description:"The analysis's status when the assertions ran: pending means the timeout passed first."`
	Results        []AssertionResult `json:"results" validate:"required" description:"One per assertion, in the request's order."`
}

func (s *Server) receiverAnalysisRoutes() {
	const base = "/api/accounts/me/receivers/{id}/messages/{message_id}"
	gone := "An expired receiver answers 410 until it is deleted 24 h after expiry; then 404."
	s.ops.GetReceiverMessageAnalysis = Handle(s.router, Endpoint[MessagePath, MessageAnalysis]{
		Method: "GET", Path: base + "/analysis", OperationID: "getReceiverMessageAnalysis", Tag: "receivers",
		Summary: "Get a message's deliverability analysis",
		Description: "status pending until the analysis job has run (usually well under a second after arrival), then done " +
			"with the report: score, grade, the session, the authentication results (SPF, DKIM per signature, DMARC, " +
			"reverse DNS, ARC), blocklist listings and the sections of findings, each with its fix. Messages that did not " +
			"arrive over SMTP answer not_applicable with the reason. " + gone,
		Errors: []int{404, 410},
		Call:   s.getMessageAnalysis,
	})
	Handle(s.router, Endpoint[AssertRequest, AssertResponse]{
		Method: "POST", Path: base + "/assertions", OperationID: "assertReceiverMessage", Tag: "receivers",
		Summary: "Check assertions against a message and its analysis",
		Description: "Answers 200 with pass and one result per assertion; an assertion that fails, an unknown type or a " +
			"missing name or limit is a failed result with its reason, never an error. While the analysis is pending the " +
			"request waits for it up to `timeout` seconds (holding no database connection); the assertions on the " +
			"analysis then fail with the reason. spam_score_at_most fails with \"no spam score\" when the analysis has none, " +
			"not_blocklisted when the blocklist check was skipped. " + gone,
		Errors: []int{404, 410},
		Timeout: func(req *AssertRequest) time.Duration {
			return time.Duration(assertSeconds(req))*time.Second + waitMargin
		},
		Call: s.assertMessage,
	})
}

func assertSeconds(req *AssertRequest) int {
	if req.Timeout == nil {
		return assertDefaultTimeout
	}
	return min(*req.Timeout, assertMaxTimeout)
}

// getMessageAnalysis serves GET .../messages/{message_id}/analysis.
func (s *Server) getMessageAnalysis(ctx context.Context, req *MessagePath) (*MessageAnalysis, error) {
	a, err := receivers.GetAnalysis(ctx, s.db, mustCaller(ctx).AccountID, req.ID, req.MessageID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	return &MessageAnalysis{Status: a.Status, Reason: a.Reason, AnalyzedAt: a.AnalyzedAt, Report: a.Report}, nil
}

// assertMessage serves POST .../messages/{message_id}/assertions.
func (s *Server) assertMessage(ctx context.Context, req *AssertRequest) (*AssertResponse, error) {
	account := mustCaller(ctx).AccountID
	m, err := receivers.GetMessage(ctx, s.db, account, req.ID, req.MessageID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	timeout := time.Duration(assertSeconds(req)) * time.Second
	a, err := receivers.WaitAnalysis(ctx, s.db, s.deps.Waiters, account, req.ID, req.MessageID, timeout, s.now)
	if err != nil {
		return nil, receiverError(err)
	}
	subj := deliverability.Subject{Report: a.Report, Links: len(m.Details.Links), Size: m.SizeBytes}
	switch a.Status {
	case receivers.AnalysisPending:
		subj.NoReport = "the analysis is still pending after the timeout of " + timeout.String()
	case receivers.AnalysisNotApplicable:
		subj.NoReport = a.Reason
	}
	for _, h := range m.Details.Headers {
		subj.Headers = append(subj.Headers, deliverability.HeaderField{Name: h.Name, Value: h.Value})
	}
	as := make([]deliverability.Assertion, len(req.Assertions))
	for i, in := range req.Assertions {
		as[i] = deliverability.Assertion{Type: in.Type, Name: in.Name, Value: in.Value, Limit: in.Limit}
	}
	pass, results := deliverability.Check(subj, as)
	out := &AssertResponse{Pass: pass, AnalysisStatus: a.Status, Results: make([]AssertionResult, len(results))}
	for i, r := range results {
		out.Results[i] = AssertionResult(r)
	}
	return out, nil
}

// withAnalysis adds the analysis summary to a message (GET .../messages/{message_id}).
func (s *Server) withAnalysis(ctx context.Context, m *Message) (*Message, error) {
	sums, err := receivers.AnalysisSummaries(ctx, s.db, m.ReceiverID, []uuid.UUID{m.ID})
	if err != nil {
		return nil, err
	}
	if sum, ok := sums[m.ID]; ok {
		m.Analysis = analysisSummaryOf(sum)
	}
	return m, nil
}

// fillAnalysisSummaries adds the analysis summaries to a page of messages.
func (s *Server) fillAnalysisSummaries(ctx context.Context, receiverID uuid.UUID, items []MessageSummary) error {
	ids := make([]uuid.UUID, len(items))
	for i, m := range items {
		ids[i] = m.ID
	}
	sums, err := receivers.AnalysisSummaries(ctx, s.db, receiverID, ids)
	if err != nil {
		return err
	}
	for i := range items {
		if sum, ok := sums[items[i].ID]; ok {
			items[i].Analysis = analysisSummaryOf(sum)
		}
	}
	return nil
}
