package reports

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Enforcement readiness rules (documented in docs/features/reports.md).
const (
	// ReadinessWindow is the period readiness and the health cap look at.
	ReadinessWindow = 30 * 24 * time.Hour
	// ReadinessMinMessages is the least legitimate volume over the window
	// before a policy step is recommended.
	ReadinessMinMessages = 100
	// ReadinessShare is the compliant share of legitimate volume from which
	// the next policy step is recommended.
	ReadinessShare = 0.98
)

// Source is one sending source of a domain over a period: a known sender
// (its IPs grouped under the sender map's name), or an unknown IP.
type Source struct {
	Name       string `json:"name" validate:"required" description:"The sender's name from the sender map, else the reverse DNS base domain, else the IP."`
	Type       string `json:"type" validate:"required" description:"The sender's type from the sender map (SaaS, Marketing, Email Provider, ISP...); empty when unknown."`
	Known      bool   `json:"known" validate:"required" description:"Whether the sender map knows the source."`
	BaseDomain string `json:"base_domain" validate:"required" description:"Base domain of the reverse DNS names; empty without one."`
	Category   string `json:"category" validate:"required" enum:"compliant,forwarded,non_compliant,threat_unknown"`
	Messages   int64  `json:"messages" validate:"required"`
	Compliant  int64  `json:"compliant" validate:"required" description:"Messages passing DMARC through aligned SPF or DKIM (forwarded excluded)."`
	Forwarded  int64  `json:"forwarded" validate:"required" description:"Messages passing through aligned DKIM while SPF itself failed."`
	Failing    int64  `json:"failing" validate:"required" description:"Messages failing DMARC."`
	// Rates are shares of Messages, 0..1.
	DMARCPassRate   float64    `json:"dmarc_pass_rate" validate:"required"`
	DKIMAlignedRate float64    `json:"dkim_aligned_rate" validate:"required"`
	SPFAlignedRate  float64    `json:"spf_aligned_rate" validate:"required"`
	IPCount         int        `json:"ip_count" validate:"required" description:"How many IPs the source sent from; ips lists the busiest of them."`
	IPs             []SourceIP `json:"ips" validate:"required" description:"The source's busiest IPs, most volume first (at most 50)."`
	DKIMSelectors   []string   `json:"dkim_selectors" validate:"required" description:"DKIM selectors seen with d= the domain."`

	dkimAligned, spfAligned int64
}

// SourceIP is one IP of a source.
type SourceIP struct {
	IP       string `json:"ip" validate:"required"`
	PTR      string `json:"ptr" validate:"required" description:"Reverse DNS name; empty when none is known yet."`
	Messages int64  `json:"messages" validate:"required"`
}

// Bounds of a read of a domain's daily source aggregates (the sources
// listing, guidance, the health score's pass rate), so that it answers in
// bounded time whatever the domain's reports stored.
const (
	// MaxSourceRowsRead is the most daily rows (one per day and source IP)
	// one read sums. A period holding more is read from its newest day
	// back, whole days only, and the answer says where it starts; a single
	// day holding more is read in part.
	MaxSourceRowsRead = 100_000
	// MaxSourceGroups is the most source IPs a listing sums, most volume
	// first.
	MaxSourceGroups = 5_000
	// DefaultSourcesListed and MaxSourcesListed are how many sources a
	// listing returns by default and at most, most volume first; the
	// listing says how many there are.
	DefaultSourcesListed = 100
	MaxSourcesListed     = 1_000
	// MaxSourceIPsListed is the most IPs a source lists, most volume
	// first; it says how many it has.
	MaxSourceIPsListed = 50
	// maxFixes bounds the fixes guidance lists (one per failing known
	// sender, most failing first).
	maxFixes = 100
)

// Period is the part of a requested period that a bounded read covered.
type Period struct {
	Since time.Time
	Until time.Time
	// Truncated is true when the requested period held more than
	// MaxSourceRowsRead daily rows: Since is then the first day read.
	Truncated bool
}

// boundedPeriod returns the part of [since, until] that a read of at most
// MaxSourceRowsRead daily rows covers.
func boundedPeriod(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (Period, error) {
	p := Period{Since: since, Until: until}
	cut, err := q.DMARCSourceDayCutoff(ctx, db, dbsqlc.DMARCSourceDayCutoffParams{
		DomainID: domainID, Since: since, Until: until, MaxRows: MaxSourceRowsRead,
	})
	if dbutil.IsNotFound(err) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("error bounding the period read: %w", err)
	}
	p.Truncated = true
	p.Since = cut.CutDay.AddDate(0, 0, 1)
	if !cut.CutDay.Before(cut.NewestDay) {
		p.Since = cut.NewestDay // the newest day alone holds more: read in part
	}
	return p, nil
}

// SourceList is a domain's sources over the period read.
type SourceList struct {
	Period
	Sources []Source
	// SourceCount is how many sources the period read holds: Sources
	// lists the first of them.
	SourceCount int
}

// Sources lists a domain's sending sources between two days (inclusive),
// the first limit of them by volume (at most MaxSourcesListed), summed
// from at most MaxSourceGroups source IPs in at most MaxSourceRowsRead
// daily rows. Reverse DNS comes from the cache the parse job fills; a
// source whose IPs were never resolved is unknown. The answer comes from
// the domain's stored summary while it is current (summary.go), so a read
// costs the same however many IPs the domain has seen.
func (s *Service) Sources(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time, limit int) (SourceList, error) {
	limit = min(max(limit, 1), MaxSourcesListed)
	sum, ok, err := s.stored(ctx, db, domainID, since, until)
	if err != nil {
		return SourceList{}, err
	}
	if !ok {
		if sum, err = s.compute(ctx, db, domainID, since, until); err != nil {
			return SourceList{}, err
		}
		return SourceList{Period: sum.period, Sources: sum.sources[:min(limit, len(sum.sources))], SourceCount: sum.count}, nil
	}
	sources, err := storedSources(ctx, db, domainID, kindOf(since, until), false, limit)
	if err != nil {
		return SourceList{}, err
	}
	return SourceList{Period: sum.period, Sources: sources, SourceCount: sum.count}, nil
}

// rates sets a source's rates from its volumes.
func (src *Source) rates() {
	if src.Messages > 0 {
		m := float64(src.Messages)
		src.DMARCPassRate = float64(src.Compliant+src.Forwarded) / m
		src.DKIMAlignedRate = float64(src.dkimAligned) / m
		src.SPFAlignedRate = float64(src.spfAligned) / m
	}
}

// category is the category holding most of a source's volume; a tie goes
// to the worse one.
func category(src *Source) string {
	failing := CategoryThreatUnknown
	if src.Known {
		failing = CategoryNonCompliant
	}
	best, bestN := failing, src.Failing
	for _, c := range []struct {
		name string
		n    int64
	}{{CategoryForwarded, src.Forwarded}, {CategoryCompliant, src.Compliant}} {
		if c.n > bestN {
			best, bestN = c.name, c.n
		}
	}
	return best
}

func mergeSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Policy is what the domain's DMARC record says, from its latest DNS check.
type Policy struct {
	// P is none, quarantine or reject; empty when the domain has no record.
	P     string
	ADKIM string
	ASPF  string
	// SP and NP are the sp and np tags; empty when absent.
	SP string
	NP string
}

// Guidance is the advice built from a domain's sources.
type Guidance struct {
	Since     time.Time `json:"since" validate:"required" description:"Start of the period read: 30 days before until, or later when truncated."`
	Until     time.Time `json:"until" validate:"required"`
	Truncated bool      `json:"truncated" validate:"required" description:"The 30 days held more daily source rows than one read sums: only the newest days that fit were read, from since."`
	Readiness Readiness `json:"readiness" validate:"required"`
	Fixes     []Fix     `json:"fixes" validate:"required" description:"One per known sender failing DMARC, most failing volume first (at most 100)."`
	NP        NPAdvice  `json:"np" validate:"required" description:"DMARCbis np= (the policy for non-existent subdomains), from the subdomains mail claimed that do not exist in DNS."`
}

// Readiness says whether the domain can move up the DMARC policy ladder
// (none -> quarantine -> reject; pct is never used, as DMARCbis drops it).
type Readiness struct {
	CurrentPolicy string `json:"current_policy" validate:"required" description:"p of the DMARC record found by the latest check; empty without a record."`
	NextPolicy    string `json:"next_policy" validate:"required" description:"The next step on none -> quarantine -> reject; empty at reject."`
	Ready         bool   `json:"ready" validate:"required" description:"Whether the next step can be taken now."`
	// Volumes over the window.
	Messages           int64    `json:"messages" validate:"required" description:"All volume reported over the last 30 days."`
	LegitimateMessages int64    `json:"legitimate_messages" validate:"required" description:"Volume of compliant, forwarded and known (non-compliant) sources: threat/unknown volume is what enforcement stops."`
	CompliantShare     float64  `json:"compliant_share" validate:"required" description:"Share (0..1) of legitimate volume passing DMARC."`
	MinimumMessages    int      `json:"minimum_messages" validate:"required"`
	RequiredShare      float64  `json:"required_share" validate:"required"`
	Blockers           []string `json:"blockers" validate:"required" description:"What stands between the domain and the next step."`
}

// Fix is the concrete setup a failing known sender needs.
type Fix struct {
	Source   string   `json:"source" validate:"required"`
	Type     string   `json:"type" validate:"required"`
	Messages int64    `json:"messages" validate:"required"`
	Failing  int64    `json:"failing" validate:"required"`
	Steps    []string `json:"steps" validate:"required"`
}

// senderSetup is how a well-known sender is authorised: its SPF include
// (or custom return-path) and how its DKIM signing for the domain is set up.
type senderSetup struct {
	match string // lower-case substring of the sender map's name
	spf   string
	dkim  string
}

var senderSetups = []senderSetup{
	{"amazon ses", "set a custom MAIL FROM domain (e.g. bounce.%[1]s) in Amazon SES so SPF (include:amazonses.com) aligns", "enable Easy DKIM for %[1]s in Amazon SES and publish its three CNAME records (<token>._domainkey.%[1]s)"},
	{"sendgrid", "complete SendGrid domain authentication for %[1]s (its CNAMEs make the return path a subdomain of %[1]s, SPF include:sendgrid.net)", "publish SendGrid's DKIM CNAMEs s1._domainkey.%[1]s and s2._domainkey.%[1]s"},
	{"mailgun", "send from a Mailgun domain under %[1]s (e.g. mg.%[1]s) so the return path aligns; SPF include:mailgun.org", "publish the DKIM key Mailgun shows for the domain (selector such as k1 or pic) at <selector>._domainkey.%[1]s"},
	{"postmark", "publish Postmark's custom Return-Path CNAME (pm-bounces.%[1]s -> pm.mtasv.net) so SPF aligns", "publish Postmark's DKIM TXT record (<date>pm._domainkey.%[1]s)"},
	{"google", "add include:_spf.google.com to the SPF record of %[1]s", "generate a DKIM key in the Google Admin console and publish google._domainkey.%[1]s"},
	{"outlook", "add include:spf.protection.outlook.com to the SPF record of %[1]s", "enable DKIM for %[1]s in Microsoft 365 Defender and publish the CNAMEs selector1._domainkey.%[1]s and selector2._domainkey.%[1]s"},
	{"mailchimp transactional", "add include:spf.mandrillapp.com to the SPF record of %[1]s (or rely on DKIM)", "publish the Mandrill DKIM CNAMEs mte1._domainkey.%[1]s and mte2._domainkey.%[1]s"},
	{"mailchimp", "rely on DKIM: Mailchimp's return path is its own domain", "authenticate %[1]s in Mailchimp and publish the CNAMEs k2._domainkey.%[1]s and k3._domainkey.%[1]s"},
	{"hubspot", "rely on DKIM, or connect a custom return path in HubSpot", "connect %[1]s in HubSpot and publish the CNAMEs hs1-<id>._domainkey.%[1]s and hs2-<id>._domainkey.%[1]s"},
	{"brevo", "rely on DKIM: Brevo's return path is its own domain", "authenticate %[1]s in Brevo and publish its DKIM record (brevo1._domainkey.%[1]s)"},
	{"mailjet", "add include:spf.mailjet.com to the SPF record of %[1]s", "publish Mailjet's DKIM TXT record (mailjet._domainkey.%[1]s)"},
	{"sparkpost", "set a custom bounce domain under %[1]s in SparkPost so SPF aligns", "publish SparkPost's DKIM TXT record (scph<id>._domainkey.%[1]s)"},
	{"zoho", "add include:zoho.com (zoho.eu in Europe) to the SPF record of %[1]s", "generate a DKIM key in Zoho Mail admin and publish <selector>._domainkey.%[1]s"},
	{"salesforce", "add include:_spf.salesforce.com to the SPF record of %[1]s", "create a DKIM key in Salesforce setup and publish its CNAMEs at <selector>._domainkey.%[1]s"},
}

// Guidance builds the readiness and fixes for a domain from its sources
// over the readiness window ending at until.
func (s *Service) Guidance(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, domain string, policy Policy, until time.Time) (*Guidance, error) {
	since := until.Add(-ReadinessWindow)
	sum, failingKnown, err := s.failingKnown(ctx, db, domainID, since, until)
	if err != nil {
		return nil, err
	}
	g := &Guidance{Since: sum.period.Since.UTC(), Until: until.UTC(), Truncated: sum.period.Truncated, Fixes: []Fix{}}
	r := Readiness{CurrentPolicy: policy.P, MinimumMessages: ReadinessMinMessages, RequiredShare: ReadinessShare, Blockers: []string{},
		Messages: sum.totals.messages, LegitimateMessages: sum.totals.legitimate}
	if r.LegitimateMessages > 0 {
		r.CompliantShare = float64(sum.totals.passing) / float64(r.LegitimateMessages)
	}
	switch policy.P {
	case "":
		r.NextPolicy = "none"
		r.Blockers = append(r.Blockers, "the domain has no DMARC record: publish v=DMARC1; p=none with our rua address first")
	case "none":
		r.NextPolicy = "quarantine"
	case "quarantine":
		r.NextPolicy = "reject"
	}
	if policy.P != "" && r.NextPolicy != "" {
		if r.LegitimateMessages < ReadinessMinMessages {
			r.Blockers = append(r.Blockers, fmt.Sprintf("only %d legitimate messages reported over 30 days; at least %d are needed to judge", r.LegitimateMessages, ReadinessMinMessages))
		}
		if r.CompliantShare < ReadinessShare {
			r.Blockers = append(r.Blockers, fmt.Sprintf("%.1f%% of legitimate mail passes DMARC; %.0f%% is needed", r.CompliantShare*100, ReadinessShare*100))
		}
	}
	for _, src := range failingKnown {
		fix := Fix{Source: src.Name, Type: src.Type, Messages: src.Messages, Failing: src.Failing, Steps: fixSteps(src, domain, policy)}
		g.Fixes = append(g.Fixes, fix)
		if policy.P != "" && r.NextPolicy != "" && len(r.Blockers) < 10 {
			r.Blockers = append(r.Blockers, fmt.Sprintf("%s sends %d messages failing DMARC", src.Name, src.Failing))
		}
	}
	r.Ready = policy.P != "" && r.NextPolicy != "" && len(r.Blockers) == 0
	g.Readiness = r
	if g.NP, err = npAdvice(ctx, db, domainID, policy, until); err != nil {
		return nil, err
	}
	return g, nil
}

// failingKnown returns the readiness window's summary and its known
// senders failing DMARC, most failing volume first (maxFixes at most).
func (s *Service) failingKnown(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (summary, []Source, error) {
	sum, ok, err := s.stored(ctx, db, domainID, since, until)
	if err != nil {
		return sum, nil, err
	}
	if ok {
		list, err := storedSources(ctx, db, domainID, kindOf(since, until), true, maxFixes)
		return sum, list, err
	}
	if sum, err = s.compute(ctx, db, domainID, since, until); err != nil {
		return sum, nil, err
	}
	var list []Source
	for _, src := range sum.sources {
		if src.Known && src.Failing > 0 {
			list = append(list, src)
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Failing > list[j].Failing })
	return sum, list[:min(len(list), maxFixes)], nil
}

func fixSteps(src Source, domain string, policy Policy) []string {
	var steps []string
	var setup *senderSetup
	name := strings.ToLower(src.Name)
	for i := range senderSetups {
		if strings.Contains(name, senderSetups[i].match) {
			setup = &senderSetups[i]
			break
		}
	}
	if src.DKIMAlignedRate < 1 {
		if setup != nil {
			steps = append(steps, "DKIM: "+fmt.Sprintf(setup.dkim, domain))
		} else {
			steps = append(steps, fmt.Sprintf("DKIM: enable DKIM signing with d=%s at %s and publish the selector it gives at <selector>._domainkey.%s", domain, src.Name, domain))
		}
	}
	if src.SPFAlignedRate < 1 {
		if setup != nil {
			steps = append(steps, "SPF: "+fmt.Sprintf(setup.spf, domain))
		} else {
			steps = append(steps, fmt.Sprintf("SPF: authorise %s in the SPF record of %s (its documented include), with a return path under %s so SPF aligns", src.Name, domain, domain))
		}
	}
	if policy.ADKIM == "s" || policy.ASPF == "s" {
		steps = append(steps, "Alignment: the record asks for strict alignment (adkim=s or aspf=s); relaxed (r) lets identifiers on subdomains of "+domain+" align")
	}
	return steps
}

// PassRate is the domain's DMARC pass rate and volume over the readiness
// window ending at until (at most MaxSourceRowsRead daily rows, newest
// first): the input of the health score's DMARC cap.
func PassRate(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, until time.Time) (rate float64, messages int64, err error) {
	period, err := boundedPeriod(ctx, db, domainID, until.Add(-ReadinessWindow), until)
	if err != nil {
		return 0, 0, err
	}
	t, err := q.DMARCSourceDayTotals(ctx, db, dbsqlc.DMARCSourceDayTotalsParams{
		DomainID: domainID, Since: period.Since, Until: until, MaxRows: MaxSourceRowsRead,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("error summing DMARC volume: %w", err)
	}
	if t.Messages > 0 {
		rate = float64(t.Passing) / float64(t.Messages)
	}
	return rate, t.Messages, nil
}

// SelectorsSeen lists the DKIM selectors seen with d= the domain in its
// reports over the readiness window ending at until (at most
// MaxSourceRowsRead daily rows, newest first): the domain's DKIM check
// probes them.
func SelectorsSeen(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, until time.Time) ([]string, error) {
	sel, err := q.DMARCSelectorsSeen(ctx, db, dbsqlc.DMARCSelectorsSeenParams{
		DomainID: domainID, Since: until.Add(-ReadinessWindow), MaxRows: MaxSourceRowsRead,
	})
	if err != nil {
		return nil, fmt.Errorf("error reading DKIM selectors seen: %w", err)
	}
	return sel, nil
}
