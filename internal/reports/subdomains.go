package reports

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Bounds of the header_from names of a domain's reports (documented in
// docs/features/reports.md).
const (
	// MaxReportSubdomains bounds the names one report counts, busiest
	// first: the rows a report writes follow its days, never the records
	// it holds.
	MaxReportSubdomains = 100
	// MaxKnownSubdomains bounds the names a domain knows (the domain itself
	// among them); past it new names are neither recorded, counted nor
	// announced.
	MaxKnownSubdomains = 1_000
	// maxNewSubdomainEvents caps dmarc_new_subdomain events per report.
	maxNewSubdomainEvents = 10
)

// TypeDMARCNewSubdomain is emitted for a subdomain mail claims for the
// first time (registered in internal/events).
const TypeDMARCNewSubdomain = events.TypeDMARCNewSubdomain

// HeaderFrom is one header_from name of a report with the messages of the
// records claiming it and how many of them passed DMARC.
type HeaderFrom struct {
	Name     string
	Messages int64
	Passing  int64
}

// HeaderFroms sums a report's records per header_from name that is domain
// or one of its subdomains. Names are normalised by domainname.Normalize
// (lower case, A-labels, no trailing dot); names it refuses and names
// outside domain are left out. A record passes DMARC when its evaluated
// DKIM or SPF passed (aligned), as the sources count it. At most
// MaxReportSubdomains names are returned, most messages first (the domain
// itself first among equals, then by name).
func HeaderFroms(records []dmarcrpt.Record, domain string) []HeaderFrom {
	sums := map[string]*HeaderFrom{}
	names := map[string]string{} // raw -> normalised ("" when refused or foreign)
	for i := range records {
		r := &records[i]
		if r.Count <= 0 {
			continue
		}
		n, ok := names[r.HeaderFrom]
		if !ok {
			n, _ = domainname.Normalize(r.HeaderFrom)
			if n != domain && !strings.HasSuffix(n, "."+domain) {
				n = ""
			}
			names[r.HeaderFrom] = n
		}
		if n == "" {
			continue
		}
		h := sums[n]
		if h == nil {
			h = &HeaderFrom{Name: n}
			sums[n] = h
		}
		h.Messages = satAdd(h.Messages, r.Count)
		if r.DKIM == "pass" || r.SPF == "pass" {
			h.Passing = satAdd(h.Passing, r.Count)
		}
	}
	out := make([]HeaderFrom, 0, len(sums))
	for _, h := range sums {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Messages != b.Messages {
			return a.Messages > b.Messages
		}
		if (a.Name == domain) != (b.Name == domain) {
			return a.Name == domain
		}
		return a.Name < b.Name
	})
	return out[:min(len(out), MaxReportSubdomains)]
}

// satAdd adds two non-negative counts, stopping at the largest int64: a
// report's counts are not bounded.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// subdomainsSeen is what recording a report's names found.
type subdomainsSeen struct {
	// added are the subdomains new to the domain (never the domain
	// itself), busiest first.
	added []HeaderFrom
	// baseline is true when the domain knew no name before: its names are
	// recorded without events.
	baseline bool
	// subdomains is true when the report counted a subdomain (the lookup
	// job then has names to check).
	subdomains bool
}

// addHeaderFroms records a report's names: known ones get last_seen moved
// on, new ones are added while the domain knows fewer than
// MaxKnownSubdomains (the domain itself first, then busiest first), and
// the known ones are added to the daily counters over days (spread as its
// source days are). It runs after addDays, which took the domain's source
// version row: writers of one domain are serialised there, so the bound
// holds without a lock of its own.
func addHeaderFroms(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, domain string, days []time.Time, names []HeaderFrom) (subdomainsSeen, error) {
	var out subdomainsSeen
	if len(names) == 0 || len(days) == 0 {
		return out, nil
	}
	first, last := days[0], days[len(days)-1]
	count, err := q.DMARCSubdomainCount(ctx, tx, domainID)
	if err != nil {
		return out, fmt.Errorf("error counting known subdomains: %w", err)
	}
	out.baseline = count == 0
	sorted := slices.Clone(names)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	list := make([]string, len(sorted))
	for i, h := range sorted {
		list[i] = h.Name
	}
	seen, err := q.DMARCSubdomainsSeen(ctx, tx, dbsqlc.DMARCSubdomainsSeenParams{DomainID: domainID, Names: list, LastDay: last})
	if err != nil {
		return out, fmt.Errorf("error updating known subdomains: %w", err)
	}
	known := map[string]bool{}
	for _, n := range seen {
		known[n] = true
	}
	fresh := newNames(names, known, domain, MaxKnownSubdomains-int(count))
	isNew := map[string]bool{}
	if len(fresh) > 0 {
		b := dbsqlc.DMARCSubdomainsAddParams{DomainID: domainID, FirstDay: first, LastDay: last}
		for _, h := range fresh {
			b.Names, b.Messages, b.Passing = append(b.Names, h.Name), append(b.Messages, h.Messages), append(b.Passing, h.Passing)
		}
		added, err := q.DMARCSubdomainsAdd(ctx, tx, b)
		if err != nil {
			return out, fmt.Errorf("error adding known subdomains: %w", err)
		}
		for _, n := range added {
			known[n], isNew[n] = true, true
		}
	}
	for _, h := range names { // busiest first
		if known[h.Name] && h.Name != domain {
			out.subdomains = true
			if isNew[h.Name] {
				out.added = append(out.added, h)
			}
		}
	}
	return out, addHeaderFromDays(ctx, tx, domainID, days, sorted, known)
}

// newNames returns the names not known yet, at most room of them: the
// domain itself first, then busiest first; sorted by name, the order every
// writer inserts in.
func newNames(names []HeaderFrom, known map[string]bool, domain string, room int) []HeaderFrom {
	var fresh []HeaderFrom
	for _, h := range names {
		if !known[h.Name] && h.Name == domain {
			fresh = append(fresh, h)
		}
	}
	for _, h := range names {
		if !known[h.Name] && h.Name != domain {
			fresh = append(fresh, h)
		}
	}
	fresh = fresh[:max(0, min(len(fresh), room))]
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Name < fresh[j].Name })
	return fresh
}

// addHeaderFromDays adds the known names of sorted (sorted by name) to the
// domain's daily counters over days, in one statement, keys sorted by day
// and name.
func addHeaderFromDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, days []time.Time, sorted []HeaderFrom, known map[string]bool) error {
	k := len(days)
	b := dbsqlc.DMARCHeaderFromDayAddManyParams{DomainID: domainID}
	for i, d := range days {
		for _, h := range sorted {
			m := share(h.Messages, i, k)
			if !known[h.Name] || m == 0 {
				continue
			}
			b.Days, b.HeaderFroms = append(b.Days, d), append(b.HeaderFroms, h.Name)
			b.Messages, b.Passing = append(b.Messages, m), append(b.Passing, share(h.Passing, i, k))
		}
	}
	if len(b.Days) == 0 {
		return nil
	}
	if err := q.DMARCHeaderFromDayAddMany(ctx, tx, b); err != nil {
		return fmt.Errorf("error adding daily header_from counters: %w", err)
	}
	return nil
}

// emitNewSubdomains emits dmarc_new_subdomain for the subdomains the
// report added, busiest first, at most maxNewSubdomainEvents; none when
// the report set the domain's baseline.
func emitNewSubdomains(ctx context.Context, tx pgx.Tx, emitter *events.Emitter, msg *dbsqlc.ReportMessageGetForUpdateRow,
	f *dmarcrpt.Feedback, firstDay time.Time, seen subdomainsSeen) error {
	if seen.baseline {
		return nil
	}
	for i, h := range seen.added {
		if i == maxNewSubdomainEvents {
			break
		}
		var rate float64
		if h.Messages > 0 {
			rate = float64(h.Passing) / float64(h.Messages)
		}
		severity := events.SeverityInfo
		if rate < 0.5 {
			severity = events.SeverityWarning // mostly failing: a spoof, or a sender not set up
		}
		if _, err := emitter.Emit(ctx, tx, events.Event{
			AccountID: msg.AccountID, Type: TypeDMARCNewSubdomain, Domain: msg.DomainName, Tags: msg.DomainTags, Severity: severity,
			Payload: map[string]any{
				"domain": msg.DomainName, "subdomain": h.Name, "first_seen": firstDay.Format(time.DateOnly),
				"messages": h.Messages, "passing": h.Passing, "pass_rate": rate,
				"org_name": f.ReportMetadata.OrgName, "report_id": f.ReportMetadata.ReportID,
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// SubdomainWindowDays is the window, in UTC days ending today, of the
// volumes a subdomain listing shows (the data API's view says the same).
const SubdomainWindowDays = 30

// Subdomain is one name mail claimed for a domain in its reports' From
// header: the domain itself or one of its subdomains.
type Subdomain struct {
	Name          string     `json:"name" validate:"required"`
	Subdomain     bool       `json:"subdomain" validate:"required" description:"False for the domain itself."`
	FirstSeen     string     `json:"first_seen" validate:"required" format:"date" description:"First UTC day of the report that first showed the name."`
	LastSeen      string     `json:"last_seen" validate:"required" format:"date" description:"Last UTC day of the latest report showing it."`
	FirstMessages int64      `json:"first_messages" validate:"required" description:"Messages claiming the name in the report that first showed it."`
	FirstPassing  int64      `json:"first_passing" validate:"required" description:"How many of first_messages passed DMARC."`
	Messages      int64      `json:"messages" validate:"required" description:"Messages claiming the name over the last 30 UTC days."`
	Passing       int64      `json:"passing" validate:"required" description:"How many of messages passed DMARC (aligned DKIM or SPF)."`
	PassRate      float64    `json:"pass_rate" validate:"required" description:"passing / messages, 0..1; 0 without messages."`
	DNSExists     *bool      `json:"dns_exists" validate:"required" description:"Whether the name exists in DNS: false when the last lookup answered NXDOMAIN, null before any lookup answered (the domain itself is never looked up)."`
	DNSCheckedAt  *time.Time `json:"dns_checked_at" validate:"required" description:"When the name was last looked up; null before."`
}

// SubdomainList is a domain's names over the window ending until.
type SubdomainList struct {
	Since      string      `json:"since" validate:"required" format:"date" description:"First UTC day of the 30 days messages and passing sum."`
	Until      string      `json:"until" validate:"required" format:"date"`
	Subdomains []Subdomain `json:"subdomains" validate:"required" description:"Most recently seen first, then most messages (at most 1,000: the names a domain keeps)."`
}

// Subdomains lists the names mail claimed for the domain with their
// volumes over the SubdomainWindowDays ending at now's day: one query over
// at most MaxKnownSubdomains names and their daily counters.
func Subdomains(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, domain string, now time.Time) (SubdomainList, error) {
	until := utcDay(now)
	since := until.AddDate(0, 0, 1-SubdomainWindowDays)
	rows, err := q.DMARCSubdomainList(ctx, db, dbsqlc.DMARCSubdomainListParams{DomainID: domainID, Since: since, MaxRows: MaxKnownSubdomains})
	if err != nil {
		return SubdomainList{}, fmt.Errorf("error listing subdomains: %w", err)
	}
	out := SubdomainList{Since: since.Format(time.DateOnly), Until: until.Format(time.DateOnly), Subdomains: make([]Subdomain, 0, len(rows))}
	for _, r := range rows {
		s := Subdomain{Name: r.Name, Subdomain: r.Name != domain, FirstSeen: r.FirstSeen.Format(time.DateOnly), LastSeen: r.LastSeen.Format(time.DateOnly),
			FirstMessages: r.FirstMessages, FirstPassing: r.FirstPassing, Messages: r.Messages, Passing: r.Passing,
			DNSExists: r.DnsExists, DNSCheckedAt: r.DnsCheckedAt}
		if s.Messages > 0 {
			s.PassRate = float64(s.Passing) / float64(s.Messages)
		}
		if s.DNSCheckedAt != nil {
			utc := s.DNSCheckedAt.UTC()
			s.DNSCheckedAt = &utc
		}
		out.Subdomains = append(out.Subdomains, s)
	}
	return out, nil
}
