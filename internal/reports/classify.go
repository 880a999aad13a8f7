package reports

import (
	"context"
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
	selectors                         map[string]bool
}

// classify sums a report's records per source IP. Selectors kept are those
// of DKIM results for the domain itself (d= the domain): the ones its DKIM
// check can probe.
func classify(f *dmarcrpt.Feedback, domain string) map[string]*group {
	groups := map[string]*group{}
	for _, r := range f.Records {
		ip := normaliseIP(r.SourceIP)
		g := groups[ip]
		if g == nil {
			g = &group{selectors: map[string]bool{}}
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
			if d.Domain == domain && d.Selector != "" && len(g.selectors) < 20 {
				g.selectors[strings.ToLower(d.Selector)] = true
			}
		}
	}
	return groups
}

func spfPassed(r dmarcrpt.Record) bool {
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

// reportDays returns the UTC days a report's counts are spread over: the
// day of its midpoint for a range of at most 24 h, otherwise every day the
// range touches.
func reportDays(begin, end time.Time) []time.Time {
	day := func(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
	if end.Sub(begin) <= 24*time.Hour {
		return []time.Time{day(begin.Add(end.Sub(begin) / 2))}
	}
	var out []time.Time
	last := end.Add(-time.Second)
	for d := day(begin); !d.After(last); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
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

// addDays adds a report's groups to the daily per-source aggregates, in
// one batch.
func addDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, begin, end time.Time, groups map[string]*group) error {
	days := reportDays(begin, end)
	k := len(days)
	params := make([]dbsqlc.DMARCSourceDayAddParams, 0, len(groups)*k)
	for ip, g := range groups {
		selectors := make([]string, 0, len(g.selectors))
		for s := range g.selectors {
			selectors = append(selectors, s)
		}
		sort.Strings(selectors)
		for i, d := range days {
			c, fw, fl := share(g.compliant, i, k), share(g.forwarded, i, k), share(g.failing, i, k)
			params = append(params, dbsqlc.DMARCSourceDayAddParams{
				DomainID: domainID, Day: d, SourceIp: ip, Messages: c + fw + fl,
				DkimAligned: share(g.dkimAligned, i, k), SpfAligned: share(g.spfAligned, i, k),
				Compliant: c, Forwarded: fw, Failing: fl, DkimSelectors: selectors,
			})
		}
	}
	// One order for every transaction: reports of one domain upsert the
	// same rows, and differing orders would deadlock.
	sort.Slice(params, func(i, j int) bool {
		if !params[i].Day.Equal(params[j].Day) {
			return params[i].Day.Before(params[j].Day)
		}
		return params[i].SourceIp < params[j].SourceIp
	})
	var firstErr error
	q.DMARCSourceDayAdd(ctx, tx, params).Exec(func(_ int, err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if firstErr != nil {
		return fmt.Errorf("error adding daily source aggregates: %w", firstErr)
	}
	return nil
}

// reportSources lists the source IPs of a report, most failing volume
// first, then most volume: the order their reverse DNS is resolved in
// (bounded by maxPTRLookups), so the sources that matter most are named.
func reportSources(f *dmarcrpt.Feedback) []string {
	return sortedByFailing(classify(f, f.PolicyPublished.Domain))
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
