package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/reports/sendermap"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

// Source categories (dmarcian and EasyDMARC semantics), decided per record
// group (one source IP and result set of a report):
//
//   - compliant: DMARC passes, through aligned SPF or aligned DKIM;
//   - forwarded: DMARC passes through aligned DKIM only while the SPF check
//     itself failed (no SPF result is pass): the message was relayed by a
//     host the domain never authorised and the signature survived;
//   - non_compliant: DMARC fails and the source is a known sender (its
//     reverse DNS base domain is in the sender map): a service the domain
//     uses but has not set up;
//   - threat_unknown: DMARC fails and the source is unknown.
//
// A source (a named sender grouping its IPs, or one unknown IP) takes the
// category holding most of its volume; a tie goes to the worse category.
const (
	CategoryCompliant     = "compliant"
	CategoryForwarded     = "forwarded"
	CategoryNonCompliant  = "non_compliant"
	CategoryThreatUnknown = "threat_unknown"
)

// Reverse DNS caching and concurrency.
const (
	ptrTTL         = 7 * 24 * time.Hour
	ptrConcurrency = 8
	// maxPTRLookups bounds the lookups one parse or read makes; the rest
	// stay unknown until a later run resolves them.
	maxPTRLookups = 500
)

// group sums a report's records of one source IP.
type group struct {
	messages, dkimAligned, spfAligned int64
	compliant, forwarded, failing     int64
	// selectors is nil until the group has one; signing are those of them
	// whose signature passed (the selector inventory takes only these, so
	// a spoofer's invented selectors never fill it).
	selectors, signing map[string]bool
}

// maxGroupSelectors bounds the DKIM selectors kept per source IP and report.
const maxGroupSelectors = 20

// classify sums a report's records per source IP. Selectors kept are those
// of DKIM results for the domain itself (d= the domain): the ones its DKIM
// check can probe.
func classify(f *dmarcrpt.Feedback, domain string) map[string]*group {
	groups := map[string]*group{}
	for i := range f.Records {
		r := &f.Records[i]
		ip := normaliseIP(r.SourceIP)
		g := groups[ip]
		if g == nil {
			g = &group{}
			groups[ip] = g
		}
		n := r.Count
		g.messages += n
		dkimOK, spfOK := r.DKIM == "pass", r.SPF == "pass"
		if dkimOK {
			g.dkimAligned += n
		}
		if spfOK {
			g.spfAligned += n
		}
		switch {
		case dkimOK && !spfOK && !spfPassed(r):
			g.forwarded += n
		case dkimOK || spfOK:
			g.compliant += n
		default:
			g.failing += n
		}
		for _, d := range r.DKIMResults {
			if d.Domain == domain && d.Selector != "" && len(g.selectors) < maxGroupSelectors {
				if g.selectors == nil {
					g.selectors = map[string]bool{}
				}
				g.selectors[strings.ToLower(d.Selector)] = true
				if strings.EqualFold(d.Result, "pass") {
					if g.signing == nil {
						g.signing = map[string]bool{}
					}
					g.signing[strings.ToLower(d.Selector)] = true
				}
			}
		}
	}
	return groups
}

func spfPassed(r *dmarcrpt.Record) bool {
	for _, s := range r.SPFResults {
		if s.Result == "pass" {
			return true
		}
	}
	return false
}

func normaliseIP(s string) string {
	if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSpace(s)
}

// MaxSpreadRows bounds the daily rows (source IPs x days) one report is
// spread over. A report over it counts on the day of its midpoint, one row
// per source IP, as a report of at most 24 h does, and says so in its
// reason: the rows a report adds, and the memory its parse takes, then
// follow its own size (its XML is at most dmarcrpt.MaxReportBytes), never
// that size times its days.
const MaxSpreadRows = 100_000

// sourceDayBatch is the number of daily rows written per statement.
const sourceDayBatch = 2_000

func utcDay(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// reportDays returns the UTC days a report's counts are spread over: the
// day of its midpoint for a range of at most 24 h, otherwise every day the
// range touches.
func reportDays(begin, end time.Time) []time.Time {
	if end.Sub(begin) <= 24*time.Hour {
		return []time.Time{utcDay(begin.Add(end.Sub(begin) / 2))}
	}
	var out []time.Time
	last := end.Add(-time.Second)
	for d := utcDay(begin); !d.After(last); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
}

// spreadDays returns the days a report of sources source IPs is spread
// over, and for a report too wide to spread (MaxSpreadRows) the note that
// says it was counted on its midpoint day instead.
func spreadDays(begin, end time.Time, sources int) ([]time.Time, string) {
	days := reportDays(begin, end)
	if len(days) <= 1 || sources*len(days) <= MaxSpreadRows {
		return days, ""
	}
	mid := utcDay(begin.Add(end.Sub(begin) / 2))
	return []time.Time{mid}, fmt.Sprintf("counted on %s, the middle of its range, instead of spread over its %d days: "+
		"%d source IPs x %d days exceed %d daily rows", mid.Format(time.DateOnly), len(days), sources, len(days), MaxSpreadRows)
}

// share is day i's share of n spread over k days: equal parts, the
// remainder to the first days.
func share(n int64, i, k int) int64 {
	s := n / int64(k)
	if int64(i) < n%int64(k) {
		s++
	}
	return s
}

// addDays adds a report's groups to the daily per-source aggregates of
// days, sourceDayBatch rows per statement, so the memory it takes is one
// batch beside the groups. Every writer sends its rows in one order (day,
// then source IP): reports of one domain upsert the same rows, and
// differing orders would deadlock.
func addDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, days []time.Time, groups map[string]*group) error {
	// The domain's version first: it invalidates its stored summaries
	// (summary.go) and, taken before any daily row, orders this writer
	// after any other of the domain (the per-statement bumps of schema
	// 0032 would otherwise be taken while holding rows another one needs).
	if err := q.DMARCSourceVersionBump(ctx, tx, domainID); err != nil {
		return fmt.Errorf("error bumping the daily source aggregates' version: %w", err)
	}
	ips := make([]string, 0, len(groups))
	for ip := range groups {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	selectors := make([]string, len(ips))
	for i, ip := range ips {
		selectors[i] = selectorsJSON(groups[ip].selectors)
	}
	k := len(days)
	n := min(sourceDayBatch, len(ips)*k)
	b := dbsqlc.DMARCSourceDayAddManyParams{
		DomainID: domainID, Days: make([]time.Time, 0, n), SourceIps: make([]string, 0, n), Messages: make([]int64, 0, n),
		DkimAligned: make([]int64, 0, n), SpfAligned: make([]int64, 0, n), Compliant: make([]int64, 0, n),
		Forwarded: make([]int64, 0, n), Failing: make([]int64, 0, n), DkimSelectors: make([]string, 0, n),
	}
	flush := func() error {
		if len(b.Days) == 0 {
			return nil
		}
		if err := q.DMARCSourceDayAddMany(ctx, tx, b); err != nil {
			return fmt.Errorf("error adding daily source aggregates: %w", err)
		}
		b.Days, b.SourceIps, b.Messages, b.DkimAligned, b.SpfAligned = b.Days[:0], b.SourceIps[:0], b.Messages[:0], b.DkimAligned[:0], b.SpfAligned[:0]
		b.Compliant, b.Forwarded, b.Failing, b.DkimSelectors = b.Compliant[:0], b.Forwarded[:0], b.Failing[:0], b.DkimSelectors[:0]
		return nil
	}
	for i, d := range days {
		for j, ip := range ips {
			g := groups[ip]
			c, fw, fl := share(g.compliant, i, k), share(g.forwarded, i, k), share(g.failing, i, k)
			b.Days = append(b.Days, d)
			b.SourceIps = append(b.SourceIps, ip)
			b.Messages = append(b.Messages, c+fw+fl)
			b.DkimAligned = append(b.DkimAligned, share(g.dkimAligned, i, k))
			b.SpfAligned = append(b.SpfAligned, share(g.spfAligned, i, k))
			b.Compliant = append(b.Compliant, c)
			b.Forwarded = append(b.Forwarded, fw)
			b.Failing = append(b.Failing, fl)
			b.DkimSelectors = append(b.DkimSelectors, selectors[j])
			if len(b.Days) == sourceDayBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// selectorsJSON is a group's selectors as the JSON array of strings
// DMARCSourceDayAddMany takes, sorted.
func selectorsJSON(set map[string]bool) string {
	list := make([]string, 0, len(set))
	for s := range set {
		list = append(list, s)
	}
	sort.Strings(list)
	out, _ := json.Marshal(list) // []string always encodes
	return string(out)
}

func sortedByFailing(groups map[string]*group) []string {
	ips := make([]string, 0, len(groups))
	for ip := range groups {
		ips = append(ips, ip)
	}
	sort.Slice(ips, func(i, j int) bool {
		a, b := groups[ips[i]], groups[ips[j]]
		if a.failing != b.failing {
			return a.failing > b.failing
		}
		if a.messages != b.messages {
			return a.messages > b.messages
		}
		return ips[i] < ips[j]
	})
	return ips
}

// Identity names a source IP.
type Identity struct {
	PTR        string            `json:"ptr"`
	BaseDomain string            `json:"base_domain"`
	Sender     *sendermap.Sender `json:"sender"`
}

func identify(ip string, ptrs map[string]string) Identity {
	ptr := ptrs[ip]
	if ptr == "" {
		return Identity{}
	}
	id := Identity{PTR: ptr, BaseDomain: sendermap.BaseDomain(ptr)}
	if s, ok := sendermap.Lookup(id.BaseDomain); ok {
		id.Sender = &s
	}
	return id
}

// KnownSender returns the sending service a source IP's reverse DNS name
// (PTR) names: the sender map's entry for the name's base domain. A source
// whose PTR names one is a known sender (category non_compliant when its
// mail fails DMARC); ok is false for an unknown source or an empty PTR.
func KnownSender(ptr string) (sender sendermap.Sender, ok bool) {
	if id := identify("", map[string]string{"": ptr}); id.Sender != nil {
		return *id.Sender, true
	}
	return sendermap.Sender{}, false
}

// resolvePTRs returns the reverse DNS names of ips: cached ones from
// source_ptrs (fresher than ptrTTL), the rest looked up through the
// resolver with bounded concurrency and cached. An IP without a PTR or
// whose lookup failed maps to "". Failures never fail the caller.
func (s *Service) resolvePTRs(ctx context.Context, ips []string) map[string]string {
	out := make(map[string]string, len(ips))
	if len(ips) == 0 {
		return out
	}
	if len(ips) > maxPTRLookups {
		ips = ips[:maxPTRLookups]
	}
	cached, err := q.SourcePTRGetMany(ctx, s.DB, ips)
	if err != nil {
		s.logger().WarnContext(ctx, "error reading cached PTRs", "error", err)
	}
	fresh := map[string]bool{}
	for _, c := range cached {
		out[c.Ip] = c.Ptr
		if s.now().Sub(c.ResolvedAt) < ptrTTL {
			fresh[c.Ip] = true
		}
	}
	if s.Resolver == nil {
		return out
	}
	type answer struct{ ip, ptr string }
	answers := make([]answer, 0, len(ips))
	results := make(chan answer, len(ips))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ptrConcurrency)
	for _, ip := range ips {
		if fresh[ip] {
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		g.Go(func() error {
			rev, err := dns.ReverseAddr(addr.String())
			if err != nil {
				return nil
			}
			a, err := s.Resolver.Query(gctx, rev, dns.TypePTR)
			ptr := ""
			switch {
			case err == nil:
				for _, rr := range a.Records {
					if p, ok := rr.(*dns.PTR); ok {
						ptr = strings.TrimSuffix(strings.ToLower(p.Ptr), ".")
						break
					}
				}
			case !isNotFound(err):
				return nil // temporary: not cached, tried again next time
			}
			results <- answer{ip, ptr}
			return nil
		})
	}
	_ = g.Wait()
	close(results)
	for a := range results {
		answers = append(answers, a)
	}
	for _, a := range answers {
		out[a.ip] = a.ptr
		if err := q.SourcePTRUpsert(ctx, s.DB, dbsqlc.SourcePTRUpsertParams{Ip: a.ip, Ptr: a.ptr}); err != nil {
			s.logger().WarnContext(ctx, "error caching a PTR", "error", err)
			break
		}
	}
	return out
}

func isNotFound(err error) bool { return dnscheck.IsNotFound(err) }

// selectorUses lists the domain's DKIM selectors a report shows signing
// (a passing signature of the domain itself), each with its source IPs
// (busiest first) and their messages.
func selectorUses(p *parsedReport) []selectors.Use {
	bySelector := map[string]*selectors.Use{}
	for _, ip := range p.bySeverity {
		g := p.groups[ip]
		for sel := range g.signing {
			u := bySelector[sel]
			if u == nil {
				u = &selectors.Use{Selector: sel}
				bySelector[sel] = u
			}
			u.Sources = append(u.Sources, ip)
			u.Messages += g.messages
		}
	}
	out := make([]selectors.Use, 0, len(bySelector))
	for _, u := range bySelector {
		sort.SliceStable(u.Sources, func(i, j int) bool { return p.groups[u.Sources[i]].messages > p.groups[u.Sources[j]].messages })
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Selector < out[j].Selector })
	return out
}
