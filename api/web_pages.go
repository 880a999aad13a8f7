package api

// The dashboard's pages and actions (web.go has sessions, CSRF and
// rendering). Each calls the REST endpoints' functions through invoke.

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/web"
)

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	names, err := fs.Glob(web.Files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		out[base] = template.Must(template.New(base).Funcs(templateFuncs).ParseFS(web.Files, "templates/layout.html", n))
	}
	return out
}

var templateFuncs = template.FuncMap{
	// when renders a time for the viewer's zone: RFC 3339 in datetime (the
	// page's script formats it with Intl), UTC as the text until then.
	"when": func(v any) template.HTML {
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x
		case *time.Time:
			if x == nil {
				return "—"
			}
			t = *x
		default:
			return ""
		}
		u := t.UTC()
		return template.HTML(`<time datetime="` + u.Format(time.RFC3339) + `">` + template.HTMLEscapeString(u.Format("2006-01-02 15:04 UTC")) + `</time>`)
	},
	"str": func(v any) string {
		switch x := v.(type) {
		case *string:
			if x == nil {
				return "—"
			}
			return *x
		case *int:
			if x == nil {
				return "—"
			}
			return strconv.Itoa(*x)
		case *int32:
			if x == nil {
				return "—"
			}
			return strconv.Itoa(int(*x))
		case *int64:
			if x == nil {
				return "—"
			}
			return strconv.FormatInt(*x, 10)
		case *float64:
			if x == nil {
				return "—"
			}
			return strconv.FormatFloat(*x, 'f', 1, 64)
		}
		return fmt.Sprint(v)
	},
	"join":  strings.Join,
	"deref": func(b *bool) bool { return b != nil && *b },
	"pct":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	"pretty": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return ""
		}
		return string(b)
	},
	"scoreClass": func(p *int) string {
		switch {
		case p == nil:
			return "unknown"
		case *p >= 80:
			return "good"
		case *p >= 50:
			return "fair"
		}
		return "bad"
	},
	"checkNames": func() []string { return []string{"spf", "dmarc", "dkim", "mx", "mta_sts", "tls_rpt", "bimi", "dnssec"} },
	"index0": func(m CheckMap, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return "—"
	},
}

// call runs the endpoint operationID with the request's context (and so its
// session's caller).
func call[Req, Resp any](c *fiber.Ctx, s *Server, op string, req *Req) (*Resp, error) {
	return invoke[Req, Resp](c.UserContext(), s.router, op, req)
}

// pageItems returns a Page's items (a listing keeps them rendered as JSON).
func pageItems[T any](p *Page[T]) ([]T, error) {
	if p.Items != nil || p.raw == nil {
		return p.Items, nil
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out []T
	return out, json.Unmarshal(b, &out)
}

// ---- overview ----

type overviewData struct {
	Summary *DashboardSummary
	Domains []Domain
	Alerts  []Alert
	Failing []Delivery
}

func (s *Server) webOverview(c *fiber.Ctx) error {
	sum, err := call[emptyRequest, DashboardSummary](c, s, "dashboardSummary", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	d := overviewData{Summary: sum}
	if doms, err := call[ListDomainsRequest, []Domain](c, s, "listDomains", &ListDomainsRequest{}); err == nil {
		// By health: the lowest score first, domains not scored yet last.
		d.Domains = *doms
		sort.SliceStable(d.Domains, func(i, j int) bool {
			a, b := d.Domains[i].Score, d.Domains[j].Score
			if a == nil || b == nil {
				return b == nil && a != nil
			}
			return *a < *b
		})
	} else {
		return s.pageError(c, err)
	}
	no, limit := false, 10
	if p, err := call[ListAlertsRequest, Page[Alert]](c, s, "listAlerts", &ListAlertsRequest{Acknowledged: &no, PageParams: PageParams{Limit: &limit}}); err == nil {
		if d.Alerts, err = pageItems(p); err != nil {
			return err
		}
	} else {
		return s.pageError(c, err)
	}
	for _, status := range []string{"failed", "retrying"} {
		p, err := call[ListDeliveriesRequest, DeliveryPage](c, s, "listDeliveries", &ListDeliveriesRequest{Status: status, Limit: &limit})
		if err != nil {
			return s.pageError(c, err)
		}
		d.Failing = append(d.Failing, p.Items...)
	}
	return s.render(c, http.StatusOK, "overview", "Overview", d, "")
}

// ---- domains ----

func (s *Server) webDomains(c *fiber.Ctx) error {
	doms, err := call[ListDomainsRequest, []Domain](c, s, "listDomains", &ListDomainsRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	return s.render(c, http.StatusOK, "domains", "Domains", *doms, "")
}

func (s *Server) webCreateDomain(c *fiber.Ctx) error {
	req := &CreateDomainRequest{Domain: c.FormValue("domain")}
	for _, t := range strings.Split(c.FormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			req.Tags = append(req.Tags, t)
		}
	}
	d, err := call[CreateDomainRequest, Domain](c, s, "createDomain", req)
	if err != nil {
		return s.done(c, "/domains", err, "")
	}
	return s.done(c, "/domains/"+url.PathEscape(d.Domain), nil, d.Domain+" added; its first check is running")
}

// namedCheck is one check of a domain's detail.
type namedCheck struct {
	Name   string
	Result *dnscheck.Result
}

type domainData struct {
	Domain  *DomainDetail
	Checks  []namedCheck
	History []HealthEntry
	Chart   template.HTML
	Recs    []DNSRecommendation
	Sources *Sources
	Guide   *reports.Guidance
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

func (s *Server) webDomain(c *fiber.Ctx) error {
	name := c.Params("domain")
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	d, err := call[DomainPath, DomainDetail](c, s, "getDomain", &DomainPath{Name: name})
	if err != nil {
		return s.pageError(c, err)
	}
	data := domainData{Domain: d, Checks: checksOf(d.Results)}
	limit := 90
	if h, err := call[HealthHistoryRequest, []HealthEntry](c, s, "listDomainHealth", &HealthHistoryRequest{DomainPath: DomainPath{Name: d.Domain.Domain}, Limit: &limit}); err == nil {
		data.History = *h
		data.Chart = healthChart(*h)
	} else {
		return s.pageError(c, err)
	}
	if recs, err := call[DomainPath, []DNSRecommendation](c, s, "listDNSRecommendations", &DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Recs = *recs
	}
	// The DMARC insights exist only where reports are configured.
	if src, err := call[SourcesRequest, Sources](c, s, "listDMARCSources", &SourcesRequest{DomainPath: DomainPath{Name: d.Domain.Domain}}); err == nil {
		data.Sources = src
	}
	if g, err := call[DomainPath, reports.Guidance](c, s, "getDMARCGuidance", &DomainPath{Name: d.Domain.Domain}); err == nil {
		data.Guide = g
	}
	return s.render(c, http.StatusOK, "domain", d.Domain.Domain, data, "")
}

// healthChart draws the score history as an inline SVG line (oldest left),
// server-side: no script or chart library.
func healthChart(h []HealthEntry) template.HTML {
	if len(h) == 0 {
		return ""
	}
	const w, ht, pad = 600.0, 160.0, 24.0
	pts := make([]string, 0, len(h))
	n := len(h)
	var dots strings.Builder
	for i := range h {
		e := h[n-1-i] // the API lists newest first
		x := pad
		if n > 1 {
			x = pad + float64(i)*(w-2*pad)/float64(n-1)
		}
		y := pad + (100-float64(e.Score))*(ht-2*pad)/100
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		fmt.Fprintf(&dots, `<circle cx="%.1f" cy="%.1f" r="3"><title>%d at %s</title></circle>`, x, y, e.Score, e.ComputedAt.UTC().Format(time.RFC3339))
	}
	first, last := h[n-1], h[0]
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="Health score history: %d values from %d to %d">`, w, ht, n, first.Score, last.Score)
	for _, g := range []int{0, 50, 100} {
		y := pad + (100-float64(g))*(ht-2*pad)/100
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text x="2" y="%.1f">%d</text>`, pad, w-pad, y, y, y+4, g)
	}
	fmt.Fprintf(&b, `<polyline points="%s"/>%s</svg>`, strings.Join(pts, " "), dots.String())
	return template.HTML(b.String())
}

func (s *Server) webApplyRecommendation(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain"))
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, to, NotFound("recommendation"), "")
	}
	req := &ApplyRecommendationRequest{Name: c.Params("domain"), ID: id}
	if fp := c.FormValue("fingerprint"); fp != "" {
		req.Fingerprint = &fp
	}
	_, err = call[ApplyRecommendationRequest, ApplyResult](c, s, "applyDNSRecommendation", req)
	return s.done(c, to, err, "the change is being applied")
}

func (s *Server) webDismissRecommendation(c *fiber.Ctx) error {
	to := "/domains/" + url.PathEscape(c.Params("domain"))
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, to, NotFound("recommendation"), "")
	}
	_, err = call[DismissRecommendationRequest, DNSRecommendation](c, s, "dismissDNSRecommendation",
		&DismissRecommendationRequest{Name: c.Params("domain"), ID: id, Reason: c.FormValue("reason")})
	return s.done(c, to, err, "recommendation dismissed")
}

// ---- alerts ----

type alertsData struct {
	Alerts []Alert
	Show   string
	// Target is the alert the alert mail links to (?event=<id>): the page
	// marks it and scrolls to it.
	Target string
}

func (s *Server) webAlerts(c *fiber.Ctx) error {
	req := &ListAlertsRequest{}
	var target string
	if id, err := uuid.Parse(c.Query("event")); err == nil {
		target = id.String()
	}
	def := "open"
	if target != "" {
		def = "all" // the linked alert may have been acknowledged since
	}
	show := c.Query("show", def)
	switch show {
	case "open":
		f := false
		req.Acknowledged = &f
	case "acknowledged":
		t := true
		req.Acknowledged = &t
	default:
		show = "all"
	}
	p, err := call[ListAlertsRequest, Page[Alert]](c, s, "listAlerts", req)
	if err != nil {
		return s.pageError(c, err)
	}
	items, err := pageItems(p)
	if err != nil {
		return err
	}
	problem := ""
	if target != "" {
		found := false
		for _, a := range items {
			found = found || a.ID.String() == target
		}
		if !found {
			problem = "the alert this link names is not in this list: it may be older than the alerts shown, or not this account's"
		}
	}
	return s.render(c, http.StatusOK, "alerts", "Alerts", alertsData{Alerts: items, Show: show, Target: target}, problem)
}

func (s *Server) webAcknowledge(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/alerts", NotFound("alert"), "")
	}
	req := &AcknowledgeRequest{AlertPath: AlertPath{EventID: id}, AcknowledgedBy: c.FormValue("acknowledged_by")}
	if n := c.FormValue("note"); n != "" {
		req.Note = &n
	}
	_, err = call[AcknowledgeRequest, Alert](c, s, "acknowledgeAlert", req)
	return s.done(c, "/alerts", err, "alert acknowledged")
}

func (s *Server) webWithdraw(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/alerts", NotFound("alert"), "")
	}
	_, err = call[AlertPath, Alert](c, s, "unacknowledgeAlert", &AlertPath{EventID: id})
	return s.done(c, "/alerts?show=acknowledged", err, "acknowledgement withdrawn")
}

// ---- events ----

type eventsData struct {
	Events []Event
	Types  []string
	Type   string
	Since  string
	Newest string
}

// eventsRequest reads the events page's filters (type, and since as an
// RFC 3339 time or a datetime-local value taken as UTC).
func eventsRequest(c *fiber.Ctx) (*ListEventsRequest, error) {
	req := &ListEventsRequest{EventType: c.Query("event_type")}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if t, err = time.Parse("2006-01-02T15:04", v); err != nil {
				return nil, InvalidField("since", "must be a time such as 2026-01-02T15:04:05Z")
			}
		}
		req.Since = &t
	}
	if c.Query("order") == "asc" {
		req.Order = "asc"
	}
	return req, nil
}

func (s *Server) webEvents(c *fiber.Ctx) error {
	data := eventsData{Type: c.Query("event_type"), Since: c.Query("since")}
	for _, t := range events.Types() {
		data.Types = append(data.Types, t.Name)
	}
	req, err := eventsRequest(c)
	if err != nil {
		return s.render(c, http.StatusUnprocessableEntity, "events", "Events", data, "since: must be a time")
	}
	p, err := call[ListEventsRequest, Page[Event]](c, s, "listEvents", req)
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.render(c, status, "events", "Events", data, msg)
	}
	if data.Events, err = pageItems(p); err != nil {
		return err
	}
	if len(data.Events) > 0 {
		data.Newest = data.Events[0].CreatedAt.Format(time.RFC3339Nano)
	} else {
		data.Newest = s.now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	}
	return s.render(c, http.StatusOK, "events", "Events", data, "")
}

// webEventsFeed answers the events page's poll: the listing's JSON, as the
// REST route would give it.
func (s *Server) webEventsFeed(c *fiber.Ctx) error {
	req, err := eventsRequest(c)
	if err != nil {
		return err
	}
	p, err := call[ListEventsRequest, Page[Event]](c, s, "listEvents", req)
	if err != nil {
		return err
	}
	return writeResponse(c, http.StatusOK, p)
}

// ---- subscriptions and deliveries ----

type subscriptionsData struct {
	Subscriptions []Subscription
	Created       *NewSubscription
	Test          *SubscriptionTestResult
	Types         []string
}

func (s *Server) subscriptionsPage(c *fiber.Ctx, status int, extra subscriptionsData, problem string) error {
	list, err := call[emptyRequest, []Subscription](c, s, "listEventSubscriptions", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	extra.Subscriptions = *list
	for _, t := range events.Types() {
		extra.Types = append(extra.Types, t.Name)
	}
	return s.render(c, status, "subscriptions", "Subscriptions", extra, problem)
}

func (s *Server) webSubscriptions(c *fiber.Ctx) error {
	return s.subscriptionsPage(c, http.StatusOK, subscriptionsData{}, "")
}

func optional(v string) *string {
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	return &v
}

func (s *Server) webCreateSubscription(c *fiber.Ctx) error {
	req := &CreateSubscriptionRequest{URL: c.FormValue("url"), DomainFilter: optional(c.FormValue("domain_filter")),
		TagFilter: optional(c.FormValue("tag_filter"))}
	if args := c.Context().PostArgs(); args != nil {
		for _, v := range args.PeekMulti("event_types") {
			req.EventTypes = append(req.EventTypes, string(v))
		}
	}
	sub, err := call[CreateSubscriptionRequest, NewSubscription](c, s, "createEventSubscription", req)
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.subscriptionsPage(c, status, subscriptionsData{}, msg)
	}
	// The signing secret is shown in this answer only.
	return s.subscriptionsPage(c, http.StatusCreated, subscriptionsData{Created: sub}, "")
}

func (s *Server) webTestSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/subscriptions", NotFound("subscription"), "")
	}
	res, err := call[SubscriptionPath, SubscriptionTestResult](c, s, "testEventSubscription", &SubscriptionPath{ID: id})
	if err != nil {
		return s.done(c, "/subscriptions", err, "")
	}
	return s.subscriptionsPage(c, http.StatusOK, subscriptionsData{Test: res}, "")
}

func (s *Server) webEnableSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/subscriptions", NotFound("subscription"), "")
	}
	on := c.FormValue("enabled") == "true"
	_, err = call[UpdateSubscriptionRequest, Subscription](c, s, "updateEventSubscription", &UpdateSubscriptionRequest{ID: id, Enabled: &on})
	msg := "subscription disabled"
	if on {
		msg = "subscription enabled"
	}
	return s.done(c, "/subscriptions", err, msg)
}

type deliveriesData struct {
	Deliveries []Delivery
	Status     string
}

func (s *Server) webDeliveries(c *fiber.Ctx) error {
	req := &ListDeliveriesRequest{Status: c.Query("status")}
	if v := c.Query("subscription_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return s.pageError(c, NotFound("subscription"))
		}
		req.SubscriptionID = &id
	}
	p, err := call[ListDeliveriesRequest, DeliveryPage](c, s, "listDeliveries", req)
	if err != nil {
		return s.pageError(c, err)
	}
	return s.render(c, http.StatusOK, "deliveries", "Deliveries", deliveriesData{Deliveries: p.Items, Status: req.Status}, "")
}

func (s *Server) webDelivery(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.pageError(c, NotFound("delivery"))
	}
	d, err := call[DeliveryPath, DeliveryDetail](c, s, "getDelivery", &DeliveryPath{ID: id})
	if err != nil {
		return s.pageError(c, err)
	}
	return s.render(c, http.StatusOK, "delivery", "Delivery", d, "")
}

func (s *Server) webRetryDelivery(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/deliveries", NotFound("delivery"), "")
	}
	_, err = call[DeliveryPath, Delivery](c, s, "retryDelivery", &DeliveryPath{ID: id})
	return s.done(c, "/deliveries/"+id.String(), err, "retry queued")
}

// ---- receivers ----

func (s *Server) webReceivers(c *fiber.Ctx) error {
	list, err := call[ListReceiversRequest, pagedList[Receiver]](c, s, "listReceivers", &ListReceiversRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	return s.render(c, http.StatusOK, "receivers", "Receivers", list.Items, "")
}

func (s *Server) webCreateReceiver(c *fiber.Ctx) error {
	req := &CreateReceiverRequest{Channel: c.FormValue("channel"), Label: c.FormValue("label")}
	if v := c.FormValue("ttl_minutes"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil {
			return s.done(c, "/receivers", InvalidField("ttl_minutes", "must be a whole number of minutes"), "")
		}
		secs := m * 60
		req.TTLSeconds = &secs
	}
	r, err := call[CreateReceiverRequest, Receiver](c, s, "createReceiver", req)
	if err != nil {
		return s.done(c, "/receivers", err, "")
	}
	return s.done(c, "/receivers/"+r.ID.String(), nil, "receiver created: send to "+r.Address)
}

type receiverData struct {
	Receiver *Receiver
	Messages []MessageSummary
	Last     string
}

func (s *Server) webReceiver(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.pageError(c, NotFound("receiver"))
	}
	r, err := call[ReceiverPath, Receiver](c, s, "getReceiver", &ReceiverPath{ID: id})
	if err != nil {
		return s.pageError(c, err)
	}
	list, err := call[ListMessagesRequest, pagedList[MessageSummary]](c, s, "listReceiverMessages", &ListMessagesRequest{ID: id})
	if err != nil {
		return s.pageError(c, err)
	}
	data := receiverData{Receiver: r, Messages: list.Items}
	if len(list.Items) > 0 {
		data.Last = list.Items[0].ID.String() // newest first
	}
	return s.render(c, http.StatusOK, "receiver", r.Address, data, "")
}

func (s *Server) webMessage(c *fiber.Ctx) error {
	id, err1 := uuid.Parse(c.Params("id"))
	mid, err2 := uuid.Parse(c.Params("message_id"))
	if err1 != nil || err2 != nil {
		return s.pageError(c, NotFound("message"))
	}
	m, err := call[MessagePath, Message](c, s, "getReceiverMessage", &MessagePath{ID: id, MessageID: mid})
	if err != nil {
		return s.pageError(c, err)
	}
	return s.render(c, http.StatusOK, "message", m.Subject, m, "")
}

// webWaitFeed is the receiver page's long poll: the wait endpoint's own
// function under the session (200 with the next message, 204 when none came).
func (s *Server) webWaitFeed(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return NotFound("receiver")
	}
	timeout := 25
	req := &WaitRequest{ID: id, Timeout: &timeout}
	if a := c.Query("after"); a != "" {
		after, err := uuid.Parse(a)
		if err != nil {
			return InvalidField("after", "must be a message id")
		}
		req.After = &after
	}
	resp, err := invoke[WaitRequest, WaitResponse](c.UserContext(), s.router, "waitReceiver", req)
	if err != nil {
		return err
	}
	return writeResponse(c, http.StatusOK, resp)
}

// ---- settings ----

type settingsData struct {
	Keys      []APIKey
	Created   *NewAPIKey
	Prefs     *notify.Preferences
	Overrides []notify.TypePrefs
	Addresses []notify.Address
	Plan      *AccountPlan
	PlanRows  []planRow
}

// planRow is one counted limit of the plan section.
type planRow struct {
	Name  string
	Used  int64
	Limit *int // nil: no limit
}

// Full says a create of one more would be refused.
func (r planRow) Full() bool { return r.Limit != nil && r.Used >= int64(*r.Limit) }

func (s *Server) settingsPage(c *fiber.Ctx, status int, created *NewAPIKey, problem string) error {
	keys, err := call[emptyRequest, []APIKey](c, s, "listAPIKeys", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	data := settingsData{Keys: *keys, Created: created}
	if data.Prefs, err = call[emptyRequest, notify.Preferences](c, s, "getPreferences", &emptyRequest{}); err != nil {
		return s.pageError(c, err)
	}
	for _, g := range data.Prefs.Groups {
		for _, t := range g.Types {
			if t.Override.Email != nil || t.Override.Webhook != nil {
				data.Overrides = append(data.Overrides, t)
			}
		}
	}
	addrs, err := call[emptyRequest, []notify.Address](c, s, "listNotificationAddresses", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	data.Addresses = *addrs
	if data.Plan, err = call[emptyRequest, AccountPlan](c, s, "getAccountPlan", &emptyRequest{}); err != nil {
		return s.pageError(c, err)
	}
	l, u := data.Plan.Limits, data.Plan.Usage
	data.PlanRows = []planRow{{"Domains", u.Domains, l.Domains}, {"Live receivers", u.Receivers, l.Receivers},
		{"Event subscriptions", u.Subscriptions, l.Subscriptions}, {"Sending providers", u.Providers, l.Providers}}
	return s.render(c, status, "settings", "Settings", data, problem)
}

func (s *Server) webSettings(c *fiber.Ctx) error { return s.settingsPage(c, http.StatusOK, nil, "") }

func (s *Server) webCreateAPIKey(c *fiber.Ctx) error {
	k, err := call[CreateAPIKeyRequest, NewAPIKey](c, s, "createAPIKey", &CreateAPIKeyRequest{Label: c.FormValue("label")})
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.settingsPage(c, status, nil, msg)
	}
	// Rendered in this answer only: the key is never stored or sent again.
	return s.settingsPage(c, http.StatusCreated, k, "")
}

func (s *Server) webRevokeAPIKey(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/settings", NotFound("API key"), "")
	}
	_, err = call[APIKeyPath, NoContent](c, s, "revokeAPIKey", &APIKeyPath{ID: id})
	return s.done(c, "/settings", err, "API key revoked")
}

// checked reads a checkbox: present and "on" (or "true") is true.
func checked(c *fiber.Ctx, name string) *bool {
	v := c.FormValue(name)
	on := v == "on" || v == "true"
	return &on
}

func (s *Server) webSetMutes(c *fiber.Ctx) error {
	_, err := call[ChannelSwitches, notify.Preferences](c, s, "setChannelMutes",
		&ChannelSwitches{Email: checked(c, "email"), Webhook: checked(c, "webhook")})
	return s.done(c, "/settings#preferences", err, "channel mutes saved")
}

func (s *Server) webSetGroup(c *fiber.Ctx) error {
	group := c.Params("group")
	if u, err := url.PathUnescape(group); err == nil {
		group = u
	}
	_, err := call[PreferenceGroupRequest, notify.Preferences](c, s, "setPreferenceGroup", &PreferenceGroupRequest{
		Group: switchableGroup(group), ChannelSwitches: ChannelSwitches{Email: checked(c, "email"), Webhook: checked(c, "webhook")}})
	return s.done(c, "/settings#preferences", err, "preferences of "+group+" saved")
}

func (s *Server) webAddAddress(c *fiber.Ctx) error {
	a, err := call[AddNotificationAddressRequest, notify.Address](c, s, "addNotificationAddress",
		&AddNotificationAddressRequest{Email: c.FormValue("email")})
	if err != nil {
		return s.done(c, "/settings#addresses", err, "")
	}
	return s.done(c, "/settings#addresses", nil, a.Email+" added: follow the link in the mail sent to it to verify it")
}

func (s *Server) webRemoveAddress(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/settings#addresses", NotFound("notification address"), "")
	}
	_, err = call[NotificationAddressPath, NoContent](c, s, "removeNotificationAddress", &NotificationAddressPath{ID: id})
	return s.done(c, "/settings#addresses", err, "address removed")
}

func (s *Server) webResendAddress(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/settings#addresses", NotFound("notification address"), "")
	}
	a, err := call[NotificationAddressPath, notify.Address](c, s, "resendNotificationAddressVerification", &NotificationAddressPath{ID: id})
	if err != nil {
		return s.done(c, "/settings#addresses", err, "")
	}
	if a.Verified {
		return s.done(c, "/settings#addresses", nil, a.Email+" is already verified")
	}
	return s.done(c, "/settings#addresses", nil, "a new verification mail is on its way to "+a.Email)
}

// ---- notification address verification (no session) ----

type verifyData struct {
	Token   string
	Address *notify.Address
}

// webVerifyPage is where the verification mail links. It only shows a
// button: mail scanners and link previews follow links, so a GET never
// verifies.
func (s *Server) webVerifyPage(c *fiber.Ctx) error {
	token := c.Query("token")
	if token == "" || len(token) > 128 {
		return s.render(c, http.StatusBadRequest, "verify", "Verify a notification address", verifyData{},
			"this link has no valid verification token")
	}
	return s.render(c, http.StatusOK, "verify", "Verify a notification address", verifyData{Token: token}, "")
}

// webVerify posts the token to the verify endpoint's own function, under
// the same per-IP budget as the API route and the sign-in forms' CSRF
// double-submit.
func (s *Server) webVerify(c *fiber.Ctx) error {
	const title = "Verify a notification address"
	token := c.FormValue("token")
	if err := s.checkPreCSRF(c); err != nil {
		return s.render(c, http.StatusForbidden, "verify", title, verifyData{Token: token}, errCSRF.Detail)
	}
	if err := s.router.guard.chargeWith(c, s.router.guard.limiter, "ip:"+c.IP()); err != nil {
		status, msg := s.problemText(c, err)
		return s.render(c, status, "verify", title, verifyData{Token: token}, msg)
	}
	a, err := invoke[VerifyNotificationAddressRequest, notify.Address](c.UserContext(), s.router, "verifyNotificationAddress",
		&VerifyNotificationAddressRequest{Token: token})
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return s.render(c, http.StatusNotFound, "verify", title, verifyData{},
			"this verification link is unknown, already used or expired (links work once, for 48 hours)")
	}
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.render(c, status, "verify", title, verifyData{Token: token}, msg)
	}
	return s.render(c, http.StatusOK, "verify", "Address verified", verifyData{Address: a}, "")
}
