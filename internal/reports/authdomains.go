package reports

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/domainname"
)

// Kinds of an authenticated domain of a DMARC record, as
// dmarc_auth_domain_days stores them.
const (
	// AuthReturnPath is the envelope-from (SPF MAIL FROM) domain.
	AuthReturnPath = "return_path"
	// AuthDKIM is a DKIM signature's d= domain.
	AuthDKIM = "dkim"
)

// MaxReportAuthDomains bounds the (kind, domain) keys one report adds to
// the daily counters, busiest first: the rows a report writes follow its
// days, never the number of records or names it holds.
const MaxReportAuthDomains = 100

// AuthDomain is one (kind, domain) key of a report with the messages of the
// records that named it.
type AuthDomain struct {
	Kind     string
	Domain   string
	Messages int64
}

// AuthDomains sums a report's records per return-path and DKIM signing
// domain: each record counts once per distinct (kind, domain) it names.
// The return-path domains of a record are its envelope_from and the
// domains of its SPF results of scope mfrom (or no scope); a HELO result
// names a host, not a return path. Names are normalised by
// domainname.Normalize (lower case, A-labels, no trailing dot) and those it
// refuses (IP addresses, public suffixes, junk) are left out. At most
// MaxReportAuthDomains keys are returned, most messages first.
func AuthDomains(records []dmarcrpt.Record) []AuthDomain {
	type key struct{ kind, domain string }
	sums := map[key]int64{}
	names := map[string]string{} // raw -> normalised ("" when refused)
	norm := func(raw string) string {
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			raw = raw[i+1:]
		}
		n, ok := names[raw]
		if !ok {
			n, _ = domainname.Normalize(raw)
			names[raw] = n
		}
		return n
	}
	seen := map[key]bool{}
	for i := range records {
		r := &records[i]
		if r.Count <= 0 {
			continue
		}
		clear(seen)
		add := func(kind, raw string) {
			if d := norm(raw); d != "" && !seen[key{kind, d}] {
				seen[key{kind, d}] = true
				sums[key{kind, d}] += r.Count
			}
		}
		add(AuthReturnPath, r.EnvelopeFrom)
		for _, s := range r.SPFResults {
			if scope := strings.ToLower(s.Scope); scope == "" || scope == "mfrom" {
				add(AuthReturnPath, s.Domain)
			}
		}
		for _, d := range r.DKIMResults {
			add(AuthDKIM, d.Domain)
		}
	}
	out := make([]AuthDomain, 0, len(sums))
	for k, n := range sums {
		out = append(out, AuthDomain{Kind: k.kind, Domain: k.domain, Messages: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Messages != b.Messages {
			return a.Messages > b.Messages
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Domain < b.Domain
	})
	return out[:min(len(out), MaxReportAuthDomains)]
}

// addAuthDomains adds a report's authenticated domains to the domain's
// daily counters over days (spread as its source days are), in one
// statement, keys sorted by day, kind and name: the writers of a domain
// are already ordered by its source version (addDays), and one order of
// keys keeps them from deadlocking whatever that order.
func addAuthDomains(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, days []time.Time, auth []AuthDomain) error {
	if len(auth) == 0 {
		return nil
	}
	sorted := append([]AuthDomain(nil), auth...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Kind != sorted[j].Kind {
			return sorted[i].Kind < sorted[j].Kind
		}
		return sorted[i].Domain < sorted[j].Domain
	})
	k := len(days)
	n := k * len(sorted)
	b := dbsqlc.DMARCAuthDomainDayAddManyParams{DomainID: domainID, Days: make([]time.Time, 0, n),
		Kinds: make([]string, 0, n), AuthDomains: make([]string, 0, n), Messages: make([]int64, 0, n)}
	for i, d := range days {
		for _, a := range sorted {
			m := share(a.Messages, i, k)
			if m == 0 {
				continue
			}
			b.Days = append(b.Days, d)
			b.Kinds = append(b.Kinds, a.Kind)
			b.AuthDomains = append(b.AuthDomains, a.Domain)
			b.Messages = append(b.Messages, m)
		}
	}
	if err := q.DMARCAuthDomainDayAddMany(ctx, tx, b); err != nil {
		return fmt.Errorf("error adding daily authenticated domains: %w", err)
	}
	return nil
}
