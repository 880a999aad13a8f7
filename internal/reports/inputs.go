package reports

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// PolicyOf is the DMARC policy a domain's check results show: p defaults
// to none for a record without one; the zero Policy without a record.
// The guidance endpoint and the DNS recommendations both read it here, so
// they judge readiness from the same policy.
func PolicyOf(rs *dnscheck.Results) Policy {
	if rs == nil || rs.DMARC == nil || rs.DMARC.Parsed == nil {
		return Policy{}
	}
	p := Policy{P: rs.DMARC.Policy, ADKIM: rs.DMARC.Parsed.ADKIM, ASPF: rs.DMARC.Parsed.ASPF,
		SP: rs.DMARC.Parsed.SubdomainPolicy, NP: rs.DMARC.Parsed.NonexistentPolicy}
	if p.P == "" {
		p.P = "none"
	}
	return p
}

// DNSInputs is what the DNS recommendations take from the reports: the
// domain's signed addresses (empty until POST .../sign) and, for a
// domain whose DMARC record can still move up the ladder, the enforcement
// readiness GET .../dmarc/guidance shows.
type DNSInputs struct {
	ReportAddress    string
	TLSReportAddress string
	// Readiness is nil at p=reject or without a DMARC record.
	Readiness *Readiness
	// Nonexistent are the subdomains mail claimed over the last 30 days
	// that DNS says do not exist (NonexistentSubdomains), busiest first.
	Nonexistent []dbsqlc.DMARCNonexistentSubdomainsRow
}

// DNSInputs reads a domain's reporting addresses and readiness as of now.
// The addresses need the Signer (nil: none); readiness is one query over
// the domain's daily aggregates.
func (s *Service) DNSInputs(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, domain string, rs *dnscheck.Results, now time.Time) (DNSInputs, error) {
	var in DNSInputs
	if s.Signer != nil && s.Signer.Keyring != nil && s.Signer.Domain != "" {
		var err error
		if in.ReportAddress, in.TLSReportAddress, err = s.SignedAddresses(ctx, db, domainID); err != nil {
			return in, err
		}
	}
	var err error
	if in.Nonexistent, err = NonexistentSubdomains(ctx, db, domainID, now); err != nil {
		return in, err
	}
	policy := PolicyOf(rs)
	if policy.P != "none" && policy.P != "quarantine" {
		return in, nil
	}
	g, err := s.Guidance(ctx, db, domainID, domain, policy, now)
	if err != nil {
		return in, fmt.Errorf("error computing DMARC readiness: %w", err)
	}
	in.Readiness = &g.Readiness
	return in, nil
}

// RoutesAt reports whether a verified reporting address reaches its
// domain when written at domain (the recipient's domain, lower case).
// The local part carries the whole identity, so any domain the SMTP
// listener accepts could carry it; only two are honoured: INBOUND_DOMAIN,
// and a customer's verified inbound subdomain (MX setup) of the address's
// own domain, e.g. dmarc+...@reports.example.com for example.com. A
// reporting address at another customer's subdomain is unknown.
func (s *Service) RoutesAt(t Target, domain string) bool {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if s.Signer != nil && strings.EqualFold(domain, s.Signer.Domain) {
		return true
	}
	return strings.HasSuffix(domain, "."+strings.ToLower(t.Domain))
}
