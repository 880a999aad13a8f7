package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/health"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

func (h *Dashboard) webDomains(c *fiber.Ctx) error {
	doms, err := h.ops.ListDomains.Call(c.UserContext(), callerOf(c), &api.ListDomainsRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	return h.render(c, http.StatusOK, "domains", "Domains", *doms, "")
}

func (h *Dashboard) webCreateDomain(c *fiber.Ctx) error {
	req := &api.CreateDomainRequest{Domain: c.FormValue("domain")}
	for _, t := range strings.Split(c.FormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			req.Tags = append(req.Tags, t)
		}
	}
	d, err := h.ops.CreateDomain.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.done(c, "/domains", err, "")
	}
	return h.done(c, "/domains/"+url.PathEscape(d.Domain), nil, d.Domain+" added; its first check is running")
}

// domainParam is the :domain of a route, unescaped.
func domainParam(c *fiber.Ctx) string {
	name := c.Params("domain")
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	return name
}

// splitList reads a comma-separated form field; empty items are dropped.
func splitList(v string) []string {
	out := []string{}
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (h *Dashboard) webCheckDomain(c *fiber.Ctx) error {
	name := domainParam(c)
	res, err := h.ops.LookupDomainDNS.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: name})
	msg := "checked"
	if err == nil && res != nil && res.Score != nil {
		msg = fmt.Sprintf("checked: score %d", *res.Score)
	}
	return h.done(c, "/domains/"+url.PathEscape(name), err, msg)
}

func (h *Dashboard) webEditDomain(c *fiber.Ctx) error {
	name := domainParam(c)
	tags, selectors := splitList(c.FormValue("tags")), splitList(c.FormValue("dkim_selectors"))
	_, err := h.ops.UpdateDomain.Call(c.UserContext(), callerOf(c), &api.UpdateDomainRequest{DomainPath: api.DomainPath{Name: name},
		Tags: &tags, DKIMSelectors: &selectors})
	return h.done(c, "/domains/"+url.PathEscape(name), err, "saved")
}

func (h *Dashboard) webDeleteDomain(c *fiber.Ctx) error {
	name := domainParam(c)
	_, err := h.ops.DeleteDomain.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: name})
	if err != nil {
		return h.done(c, "/domains/"+url.PathEscape(name), err, "")
	}
	return h.done(c, "/domains", nil, name+" is no longer monitored")
}

// namedCheck is one check of a domain's detail.
type namedCheck struct {
	Name   string
	Result *dnscheck.Result
}

type domainData struct {
	Domain  *api.DomainDetail
	Checks  []namedCheck
	History []api.HealthEntry
	Chart   template.HTML
	// DMARCVolume and DMARCRate are the charts of the last dmarcDays days
	// of aggregate reports (empty where reports are not set up).
	DMARCVolume, DMARCRate template.HTML
	Recs                   []api.DNSRecommendation
	Sources                *api.Sources
	Guide                  *reports.Guidance
	// Subdomains are the names mail claimed in the From header (nil where
	// reports are not set up).
	Subdomains *reports.SubdomainList
	// Reporters send the domain's aggregate reports.
	Reporters []reports.Reporter
	// Selectors are the DKIM selector inventory.
	Selectors []selectors.Selector
	// Transport is the stored MX probes (Mail servers section).
	Transport *api.Transport
	// Reputation is the domain's blocklist state (nil when unreadable).
	Reputation *api.Reputation
}

func checksOf(rs *dnscheck.Results) []namedCheck {
	if rs == nil {
		return nil
	}
	var out []namedCheck
	add := func(name string, r *dnscheck.Result) {
		if r != nil {
			out = append(out, namedCheck{name, r})
		}
	}
	if rs.SPF != nil {
		add("spf", &rs.SPF.Result)
	}
	if rs.DMARC != nil {
		add("dmarc", &rs.DMARC.Result)
	}
	if rs.DKIM != nil {
		add("dkim", &rs.DKIM.Result)
	}
	if rs.MX != nil {
		add("mx", &rs.MX.Result)
	}
	if rs.MTASTS != nil {
		add("mta_sts", &rs.MTASTS.Result)
	}
	if rs.TLSRPT != nil {
		add("tls_rpt", &rs.TLSRPT.Result)
	}
	if rs.BIMI != nil {
		add("bimi", &rs.BIMI.Result)
	}
	if rs.DNSSEC != nil {
		add("dnssec", &rs.DNSSEC.Result)
	}
	return out
}

// domainPageSources is how many DMARC sources the domain page lists, most
// volume first; it says how many there are.
const domainPageSources = 15

func (h *Dashboard) webDomain(c *fiber.Ctx) error {
	name := domainParam(c)
	d, err := h.ops.GetDomain.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: name})
	if err != nil {
		return h.pageError(c, err)
	}
	data := domainData{Domain: d, Checks: checksOf(d.Results)}
	limit := 90
	if hist, err := h.ops.ListDomainHealth.Call(c.UserContext(), callerOf(c), &api.HealthHistoryRequest{DomainPath: api.DomainPath{Name: d.Domain.Domain}, Limit: &limit}); err == nil {
		data.History = *hist
		data.Chart = healthChart(d.Domain.Domain, *hist)
	} else {
		return h.pageError(c, err)
	}
	if recs, err := h.ops.ListDNSRecommendations.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Recs = *recs
	}
	// The DMARC insights exist only where reports are configured.
	listed := domainPageSources
	if src, err := h.ops.ListDMARCSources.Call(c.UserContext(), callerOf(c), &api.SourcesRequest{DomainPath: api.DomainPath{Name: d.Domain.Domain}, Limit: &listed}); err == nil {
		data.Sources = src
	}
	days := dmarcDays
	if daily, err := h.ops.DMARCDailyVolume.Call(c.UserContext(), callerOf(c), &api.DMARCDailyRequest{DomainPath: api.DomainPath{Name: d.Domain.Domain}, Days: &days}); err == nil && data.Sources != nil {
		since, _ := time.Parse(time.DateOnly, daily.From)
		signals, err := events.Signals(c.UserContext(), h.deps.DB, callerOf(c).AccountID, d.Domain.Domain, events.DMARCTimelineTypes,
			since, since.AddDate(0, 0, len(daily.Days)), events.MaxSignals)
		if err != nil {
			return h.pageError(c, err)
		}
		data.DMARCVolume, data.DMARCRate = dmarcCharts(daily, signals)
	}
	if sub, err := h.ops.ListDMARCSubdomains.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		sub.Subdomains = sub.Subdomains[:min(len(sub.Subdomains), domainPageSources)]
		data.Subdomains = sub
	}
	if sel, err := h.ops.ListDKIMSelectors.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Selectors = *sel
	}
	if rep, err := h.ops.ListDMARCReporters.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Reporters = *rep
	}
	if g, err := h.ops.GetDMARCGuidance.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Guide = g
	}
	if tr, err := h.ops.GetDomainTransport.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Transport = tr
	}
	if rep, err := h.ops.GetDomainReputation.Call(c.UserContext(), callerOf(c), &api.DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Reputation = rep
	}
	return h.render(c, http.StatusOK, "domain", d.Domain.Domain, data, "")
}

// healthChart draws the score history (oldest left) with the changes that
// were health_score_changed events marked, by the rule that emits them
// (health.Compare), in the words of the event registry.
func healthChart(domain string, h []api.HealthEntry) template.HTML {
	c := chart{ID: "health-chart", Title: "Health score of " + domain, YMax: 100, TimeFormat: "Jan 2 15:04",
		Series: []chartSeries{{Name: "Score", Class: "line-0"}}}
	n := len(h)
	for i := range h {
		e := h[n-1-i] // the API lists newest first
		p := chartPoint{At: e.ComputedAt, Values: []float64{float64(e.Score)}}
		if i > 0 {
			prev := h[n-i].Score
			if ch := health.Compare(prev, e.Score, true); ch.Emit {
				payload, _ := json.Marshal(map[string]any{"domain": domain, "previous_score": prev, "score": e.Score, "delta": ch.Delta})
				p.Mark = events.Title(events.TypeHealthScoreChanged) + ": " + events.Summary(events.TypeHealthScoreChanged, payload)
			}
		}
		c.Points = append(c.Points, p)
	}
	switch n {
	case 0:
	case 1:
		c.Desc = fmt.Sprintf("One computation so far: %d out of 100.", h[0].Score)
	default:
		c.Desc = fmt.Sprintf("%d computations from %s to %s, from %d to %d out of 100.", n,
			h[n-1].ComputedAt.UTC().Format("Jan 2"), h[0].ComputedAt.UTC().Format("Jan 2"), h[n-1].Score, h[0].Score)
	}
	return c.render()
}

func (h *Dashboard) webApplyRecommendation(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain"))
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, to, api.NotFound("recommendation"), "")
	}
	req := &api.ApplyRecommendationRequest{Name: c.Params("domain"), ID: id}
	if fp := c.FormValue("fingerprint"); fp != "" {
		req.Fingerprint = &fp
	}
	_, err = h.ops.ApplyDNSRecommendation.Call(c.UserContext(), callerOf(c), req)
	return h.done(c, to, err, "the change is being applied")
}

func (h *Dashboard) webDismissRecommendation(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain"))
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, to, api.NotFound("recommendation"), "")
	}
	_, err = h.ops.DismissDNSRecommendation.Call(c.UserContext(), callerOf(c), &api.DismissRecommendationRequest{Name: c.Params("domain"), ID: id, Reason: c.FormValue("reason")})
	return h.done(c, to, err, "recommendation dismissed")
}

// webAddPin pins the form's IP range on the domain (its blocklist watch).
func (h *Dashboard) webAddPin(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain")) + "#blocklists"
	req := &api.AddReputationPinRequest{DomainPath: api.DomainPath{Name: c.Params("domain")}, CIDR: c.FormValue("cidr")}
	if note := c.FormValue("note"); note != "" {
		req.Note = &note
	}
	p, err := h.ops.AddReputationPin.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.done(c, to, err, "")
	}
	return h.done(c, to, nil, "pinned "+p.CIDR+"; a check is queued")
}

// webRemovePin removes the form's pinned range from the domain.
func (h *Dashboard) webRemovePin(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain")) + "#blocklists"
	req := &api.ReputationPinQuery{DomainPath: api.DomainPath{Name: c.Params("domain")}, CIDR: c.FormValue("cidr")}
	_, err := h.ops.RemoveReputationPin.Call(c.UserContext(), callerOf(c), req)
	return h.done(c, to, err, "unpinned "+req.CIDR)
}
