// Package weekly builds the weekly digest: per account, a week of its
// domains' DMARC reports with the week before for a trend, the sources new
// that week, enforcement readiness, open alerts, and the blocklist and MX
// certificate state, mailed on Mondays (jobs) to the verified notification
// addresses, even in a quiet week.
//
// It reads only what is kept to be read: the daily categories of each
// domain (dmarc_domain_days, two weeks of rows), the week's
// dmarc_new_source events, the newest open alerts, and the stored
// guidance, blocklist and transport state. Every read is bounded: at most
// MaxDomains domains are listed (the rest are counted), MaxNewSources new
// sources and MaxOpenAlerts alerts are read.
package weekly

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// Bounds of one digest.
const (
	MaxDomains    = 50
	MaxNewSources = 200
	MaxOpenAlerts = 1000
	// newSourcesListed is how many new sources a domain's section names.
	newSourcesListed = 5
	// certWarnDays: an MX certificate expiring within this many days is
	// named.
	certWarnDays = 21
	// domainPage is the domains read per statement.
	domainPage = 500
)

// trendStep is the change of pass rate (in points) below which a week is
// steady.
const trendStep = 0.02

var q = dbsqlc.New()

// WeekOf returns the Monday (00:00 UTC) starting the last whole week
// before now: a digest mailed on any day of a week reports the week
// before.
func WeekOf(now time.Time) time.Time {
	d := now.UTC().Truncate(24 * time.Hour)
	back := (int(d.Weekday()) + 6) % 7 // days since Monday
	return d.AddDate(0, 0, -back-7)
}

// Report is one account's week, [Week, Week+7 days).
type Report struct {
	Week    time.Time
	Domains []Domain
	// More counts the domains beyond MaxDomains, not listed.
	More   int
	Totals Totals
	// Link is the dashboard's address (no trailing slash).
	Link string
}

// Totals sums the listed domains.
type Totals struct {
	Messages, PrevMessages int64
	Passing, PrevPassing   int64
	NewSources             int
	OpenAlerts             int64
	// Reporting counts the domains with reports this week.
	Reporting int
}

// Domain is one domain's week.
type Domain struct {
	Name                   string
	Messages, PrevMessages int64
	Passing, PrevPassing   int64
	// Week's volume by source category.
	Compliant, Forwarded, NonCompliant, ThreatUnknown int64
	NewSources                                        []NewSource
	// Readiness is nil when the guidance could not be read.
	Readiness  *reports.Readiness
	OpenAlerts int64
	// ListedShare is the share of the last 7 days' mail sent from IPs on a
	// blocklist.
	ListedShare float64
	// Certs are the MX hosts whose certificate expires soon or failed.
	Certs []Cert
	// Probed is set when the MX hosts have been probed.
	Probed bool
}

// NewSource is a dmarc_new_source event of the week.
type NewSource struct {
	IP, Name         string
	Messages, Failed int64
}

// Cert is an MX host's certificate state worth saying.
type Cert struct {
	Host     string
	DaysLeft int
}

// Rate is passing over messages, and false without messages.
func Rate(passing, messages int64) (float64, bool) {
	if messages == 0 {
		return 0, false
	}
	return float64(passing) / float64(messages), true
}

// Trend says how the pass rate moved from the week before: "up", "down",
// "steady", "new" (no reports the week before) or "" (none this week).
func Trend(passing, messages, prevPassing, prevMessages int64) string {
	now, ok := Rate(passing, messages)
	if !ok {
		return ""
	}
	before, ok := Rate(prevPassing, prevMessages)
	switch {
	case !ok:
		return "new"
	case now-before >= trendStep:
		return "up"
	case before-now >= trendStep:
		return "down"
	}
	return "steady"
}

// Builder reads a digest's parts.
type Builder struct {
	DB      dbsqlc.DBTX
	Reports *reports.Service
	// Link is the dashboard's base URL.
	Link string
}

// Build reads the account's week starting at week (a Monday, UTC), for
// the domains its settings choose, at now.
func (b *Builder) Build(ctx context.Context, account uuid.UUID, week time.Time, set Settings, now time.Time) (*Report, error) {
	r := &Report{Week: week, Link: b.Link}
	names, err := b.domains(ctx, account, set)
	if err != nil {
		return nil, err
	}
	if len(names) > MaxDomains {
		r.More = len(names) - MaxDomains
		names = names[:MaxDomains]
	}
	sources, err := b.newSources(ctx, account, week)
	if err != nil {
		return nil, err
	}
	alerts, err := b.openAlerts(ctx, account)
	if err != nil {
		return nil, err
	}
	for _, id := range names {
		d, err := b.domain(ctx, id, week, now)
		if err != nil {
			return nil, err
		}
		d.NewSources = sources[d.Name]
		d.OpenAlerts = alerts[d.Name]
		r.add(d)
	}
	return r, nil
}

func (r *Report) add(d Domain) {
	r.Domains = append(r.Domains, d)
	t := &r.Totals
	t.Messages += d.Messages
	t.PrevMessages += d.PrevMessages
	t.Passing += d.Passing
	t.PrevPassing += d.PrevPassing
	t.NewSources += len(d.NewSources)
	t.OpenAlerts += d.OpenAlerts
	if d.Messages > 0 {
		t.Reporting++
	}
}

// domains lists the ids of the account's domains the settings choose, by
// name.
func (b *Builder) domains(ctx context.Context, account uuid.UUID, set Settings) ([]uuid.UUID, error) {
	var out []uuid.UUID
	after := ""
	for {
		page, err := q.DomainList(ctx, b.DB, dbsqlc.DomainListParams{AccountID: account, After: after, MaxRows: domainPage})
		if err != nil {
			return nil, fmt.Errorf("error listing domains: %w", err)
		}
		for _, d := range page {
			if set.Chooses(d.Name, d.Tags) {
				out = append(out, d.ID)
			}
		}
		if len(page) < domainPage {
			return out, nil
		}
		after = page[len(page)-1].Name
	}
}

// domain reads one domain's week.
func (b *Builder) domain(ctx context.Context, id uuid.UUID, week, now time.Time) (Domain, error) {
	row, err := q.DomainGetByID(ctx, b.DB, id)
	if err != nil {
		return Domain{}, fmt.Errorf("error reading domain: %w", err)
	}
	d := Domain{Name: row.Name}
	days, err := reports.DailyVolume(ctx, b.DB, id, week.AddDate(0, 0, -7), week.AddDate(0, 0, 6))
	if err != nil {
		return Domain{}, err
	}
	for i, v := range days {
		passing := v.Compliant + v.Forwarded
		if i < 7 {
			d.PrevMessages += v.Messages()
			d.PrevPassing += passing
			continue
		}
		d.Messages += v.Messages()
		d.Passing += passing
		d.Compliant += v.Compliant
		d.Forwarded += v.Forwarded
		d.NonCompliant += v.NonCompliant
		d.ThreatUnknown += v.ThreatUnknown
	}
	if b.Reports != nil {
		var policy reports.Policy
		var rs dnscheck.Results
		if len(row.Results) > 0 && json.Unmarshal(row.Results, &rs) == nil {
			policy = reports.PolicyOf(&rs)
		}
		g, err := b.Reports.Guidance(ctx, b.DB, id, row.Name, policy, week.AddDate(0, 0, 7))
		if err != nil {
			return Domain{}, err
		}
		d.Readiness = &g.Readiness
	}
	if d.ListedShare, err = reputation.ListedShare(ctx, b.DB, row.AccountID, id); err != nil {
		return Domain{}, err
	}
	view, err := transport.Load(ctx, b.DB, row, now)
	if err != nil {
		return Domain{}, err
	}
	d.Probed, d.Certs = certs(view)
	return d, nil
}

// certs returns whether any MX host was probed, and the hosts whose
// certificate expires within certWarnDays (the soonest address of each),
// soonest first.
func certs(v transport.View) (bool, []Cert) {
	var out []Cert
	probed := false
	for _, h := range v.Hosts {
		left := -1
		for _, a := range h.Addresses {
			probed = true
			if a.DaysLeft != nil && (left < 0 || int(*a.DaysLeft) < left) {
				left = int(*a.DaysLeft)
			}
		}
		if left >= 0 && left <= certWarnDays {
			out = append(out, Cert{Host: h.Host, DaysLeft: left})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DaysLeft < out[j].DaysLeft })
	return probed, out
}

// newSources reads the week's dmarc_new_source events per domain, the
// busiest first.
func (b *Builder) newSources(ctx context.Context, account uuid.UUID, week time.Time) (map[string][]NewSource, error) {
	rows, err := q.WeeklyEventsOfType(ctx, b.DB, dbsqlc.WeeklyEventsOfTypeParams{
		AccountID: account, EventType: events.TypeDMARCNewSource, Since: week, Until: week.AddDate(0, 0, 7), MaxRows: MaxNewSources,
	})
	if err != nil {
		return nil, fmt.Errorf("error reading new sources: %w", err)
	}
	out := map[string][]NewSource{}
	for _, r := range rows {
		var p struct {
			Domain   string `json:"domain"`
			SourceIP string `json:"source_ip"`
			PTR      string `json:"ptr"`
			Messages int64  `json:"messages"`
			Failing  int64  `json:"failing"`
		}
		if json.Unmarshal(r.Payload, &p) != nil || r.Domain == nil {
			continue
		}
		out[*r.Domain] = append(out[*r.Domain], NewSource{IP: p.SourceIP, Name: p.PTR, Messages: p.Messages, Failed: p.Failing})
	}
	for _, list := range out {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Messages > list[j].Messages })
	}
	return out, nil
}

// openAlerts counts the open alerts per domain, of the newest
// MaxOpenAlerts.
func (b *Builder) openAlerts(ctx context.Context, account uuid.UUID) (map[string]int64, error) {
	rows, err := q.WeeklyOpenAlerts(ctx, b.DB, dbsqlc.WeeklyOpenAlertsParams{AccountID: account, MaxRows: MaxOpenAlerts})
	if err != nil {
		return nil, fmt.Errorf("error counting open alerts: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Domain] = r.Alerts
	}
	return out, nil
}
