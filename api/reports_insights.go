package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

// maxSourcesPeriod bounds the period of a sources listing.
const maxSourcesPeriod = 400 * 24 * time.Hour

// SourcesRequest lists a domain's sending sources over a period.
type SourcesRequest struct {
	DomainPath
	Since *time.Time `query:"since" description:"Start of the period (RFC 3339; its UTC day counts); default 30 days before until."`
	Until *time.Time `query:"until" description:"End of the period (RFC 3339; its UTC day counts); default now."`
	Limit *int       `query:"limit" validate:"omitempty,min=1,max=1000" description:"Sources to return, most volume first, 1 to 1000; default 100. source_count says how many there are."`
}

// Sources is the sources listing.
type Sources struct {
	Since     time.Time        `json:"since" validate:"required" description:"Start of the period read: as asked, or later when truncated."`
	Until     time.Time        `json:"until" validate:"required"`
	Truncated bool             `json:"truncated" validate:"required" description:"The period held more daily source rows (one per day and source IP) than one read sums: only its newest days that fit were read, from since (a single day holding more is read in part)."`
	Sources   []reports.Source `json:"sources" validate:"required" description:"The first sources by volume (limit)."`
	// SourceCount counts every source of the period read.
	SourceCount int `json:"source_count" validate:"required" description:"How many sources the period read holds; sources lists the first of them."`
}

// DMARCDailyRequest is GET .../dmarc/daily.
type DMARCDailyRequest struct {
	DomainPath
	Days *int `query:"days" validate:"omitempty,min=1,max=400" default:"30" description:"UTC days to cover, ending today: 1 to 400 (default 30)."`
}

// DMARCDaily is a domain's aggregate-report volume per UTC day.
type DMARCDaily struct {
	Domain string     `json:"domain" validate:"required"`
	From   string     `json:"from" validate:"required" format:"date"`
	To     string     `json:"to" validate:"required" format:"date"`
	Days   []DMARCDay `json:"days" validate:"required" description:"One entry per day, oldest first, days without reports included."`
}

// DMARCDay is one UTC day of DMARCDaily: messages by source category.
type DMARCDay struct {
	Date          string   `json:"date" validate:"required" format:"date"`
	Messages      int64    `json:"messages" validate:"required"`
	Compliant     int64    `json:"compliant" validate:"required" description:"Passed DMARC through aligned SPF or DKIM."`
	Forwarded     int64    `json:"forwarded" validate:"required" description:"Passed through aligned DKIM only, relayed by a host the domain never authorised."`
	NonCompliant  int64    `json:"non_compliant" validate:"required" description:"Failed DMARC from known senders (by reverse DNS and the sender map)."`
	ThreatUnknown int64    `json:"threat_unknown" validate:"required" description:"Failed DMARC from unknown sources."`
	PassRate      *float64 `json:"pass_rate" validate:"required" description:"Share of messages passing DMARC (compliant or forwarded), 0 to 1; null on a day without reports."`
}

func (s *Server) dmarcInsightRoutes(svc *reports.Service) {
	const tag = "dmarc and tls reports"
	s.ops.DMARCDailyVolume = Handle(s.router, Endpoint[DMARCDailyRequest, DMARCDaily]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/daily", OperationID: "dmarcDailyVolume", Tag: tag,
		Summary: "The domain's aggregate-report volume per day, by source category",
		Description: "Messages per UTC day by the category of their source (as in the sources listing) and the day's DMARC pass rate, " +
			"over the last `days` days including today. Reports spanning more than a day are spread over their days. A failing source " +
			"counts as non_compliant when the reverse DNS name resolved when its report arrived names a known sender.",
		Errors: []int{404},
		Call:   s.dmarcDailyVolume,
	})
	s.ops.ListDMARCSources = Handle(s.router, Endpoint[SourcesRequest, Sources]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/sources", OperationID: "listDMARCSources", Tag: tag,
		Summary: "Who sends mail as the domain, from its aggregate reports",
		Description: "Each source (a known sender grouping its IPs by reverse DNS and the sender map, or an unknown IP) with its volume, " +
			"DMARC pass and aligned DKIM/SPF rates, category (compliant, forwarded, non_compliant, threat_unknown), IPs with their " +
			"PTR names and the DKIM selectors seen. Days are UTC; reports spanning more than a day are spread over their days. " +
			fmt.Sprintf("The first limit sources by volume (source_count says how many there are), each with its %d busiest IPs "+
				"(ip_count says how many it has). At most %d source IPs (most volume first), summed from at most %d daily rows: "+
				"a period holding more is read from its newest day back and answered with truncated and the since it starts at. ",
				reports.MaxSourceIPsListed, reports.MaxSourceGroups, reports.MaxSourceRowsRead) +
			"422 when until is before since or the period exceeds 400 days.",
		Errors: []int{404},
		Call: func(ctx context.Context, req *SourcesRequest) (*Sources, error) {
			return s.listDMARCSources(ctx, svc, req)
		},
	})
	s.ops.ListDMARCReporters = Handle(s.router, Endpoint[DomainPath, []reports.Reporter]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/reporters", OperationID: "listDMARCReporters", Tag: tag,
		Summary: "Who sends the domain's aggregate reports, and whether they still do",
		Description: fmt.Sprintf("Each reporter (a report's org_name), most recently seen first, at most %d per domain: its first and "+
			"last report, the days it reported among the last 7, and its status. A reporter that sent daily (%d of 7 days) and has been "+
			"silent for 3 days is stopped, with a dmarc_reports_stopped event; its next report raises dmarc_reports_resumed.",
			reports.MaxReporters, reports.DailyMinDays),
		Errors: []int{404},
		Call:   s.listDMARCReporters,
	})
	s.ops.ListDKIMSelectors = Handle(s.router, Endpoint[DomainPath, []selectors.Selector]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dkim/selectors", OperationID: "listDKIMSelectors", Tag: tag,
		Summary: "The domain's DKIM selector inventory",
		Description: fmt.Sprintf("Every selector seen signing the domain's mail in aggregate reports or found published by its DNS "+
			"checks (at most %d), by name: when it was first and last seen in each, the source IPs signing with it, its key type and "+
			"size, and its status. A new selector raises dkim_selector_new, a published one unseen in reports for 90 days "+
			"dkim_selector_idle, an RSA key under 2048 bits dkim_key_weak.", selectors.MaxPerDomain),
		Errors: []int{404},
		Call:   s.listDKIMSelectors,
	})
	s.ops.GetDMARCGuidance = Handle(s.router, Endpoint[DomainPath, reports.Guidance]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/guidance", OperationID: "getDMARCGuidance", Tag: tag,
		Summary: "How to fix failing senders and when to enforce DMARC",
		Description: "Per known sender failing DMARC, the concrete fix (SPF include or return path, DKIM selector, alignment mode). " +
			"Enforcement readiness over the last 30 days: the compliant share of legitimate volume (threat/unknown excluded), " +
			"the next step on none -> quarantine -> reject (pct is never used), and what blocks it. Ready needs at least 100 " +
			"legitimate messages and a 98% compliant share.",
		Errors: []int{404},
		Call: func(ctx context.Context, req *DomainPath) (*reports.Guidance, error) {
			return s.getDMARCGuidance(ctx, svc, req)
		},
	})
}

// listDMARCSources serves GET /api/accounts/me/domains/{domain}/dmarc/sources: who sends mail as the domain, from its aggregate reports.
func (s *Server) listDMARCSources(ctx context.Context, svc *reports.Service, req *SourcesRequest) (*Sources, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	until := s.now().UTC()
	if req.Until != nil {
		until = req.Until.UTC()
	}
	since := until.Add(-reports.ReadinessWindow)
	if req.Since != nil {
		since = req.Since.UTC()
	}
	if until.Before(since) {
		return nil, InvalidField("until", "must not be before since")
	}
	if until.Sub(since) > maxSourcesPeriod {
		return nil, InvalidField("since", "the period must not exceed 400 days")
	}
	limit := reports.DefaultSourcesListed
	if req.Limit != nil {
		limit = *req.Limit
	}
	list, err := svc.Sources(ctx, s.reads, d.ID, since, until, limit)
	if err != nil {
		return nil, err
	}
	return &Sources{Since: list.Since, Until: until, Truncated: list.Truncated, Sources: nonNilSlice(list.Sources), SourceCount: list.SourceCount}, nil
}

// getDMARCGuidance serves GET /api/accounts/me/domains/{domain}/dmarc/guidance: how to fix failing senders and when to enforce DMARC.
func (s *Server) getDMARCGuidance(ctx context.Context, svc *reports.Service, req *DomainPath) (*reports.Guidance, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	var policy reports.Policy
	if len(d.Results) > 0 {
		var rs dnscheck.Results
		if json.Unmarshal(d.Results, &rs) == nil {
			policy = reports.PolicyOf(&rs) // as the DNS recommendations read it
		}
	}
	return svc.Guidance(ctx, s.reads, d.ID, d.Name, policy, s.now().UTC())
}

// dmarcDailyVolume serves GET /api/accounts/me/domains/{domain}/dmarc/daily.
func (s *Server) dmarcDailyVolume(ctx context.Context, req *DMARCDailyRequest) (*DMARCDaily, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	from, to := s.dayRange(daysParam(req.Days, 30))
	days, err := reports.DailyVolume(ctx, s.reads, d.ID, from, to)
	if err != nil {
		return nil, err
	}
	out := &DMARCDaily{Domain: d.Name, From: from.Format(dateLayout), To: to.Format(dateLayout), Days: make([]DMARCDay, len(days))}
	for i, v := range days {
		out.Days[i] = DMARCDay{Date: v.Day.Format(dateLayout), Messages: v.Messages(), Compliant: v.Compliant, Forwarded: v.Forwarded,
			NonCompliant: v.NonCompliant, ThreatUnknown: v.ThreatUnknown}
		if r, ok := v.PassRate(); ok {
			out.Days[i].PassRate = &r
		}
	}
	return out, nil
}

// listDMARCReporters serves GET /api/accounts/me/domains/{domain}/dmarc/reporters.
func (s *Server) listDMARCReporters(ctx context.Context, req *DomainPath) (*[]reports.Reporter, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	list, err := reports.Reporters(ctx, s.reads, d.ID, s.now())
	if err != nil {
		return nil, err
	}
	list = nonNilSlice(list)
	return &list, nil
}

// listDKIMSelectors serves GET /api/accounts/me/domains/{domain}/dkim/selectors.
func (s *Server) listDKIMSelectors(ctx context.Context, req *DomainPath) (*[]selectors.Selector, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	list, err := selectors.List(ctx, s.reads, d.ID, s.now())
	if err != nil {
		return nil, err
	}
	list = nonNilSlice(list)
	return &list, nil
}
