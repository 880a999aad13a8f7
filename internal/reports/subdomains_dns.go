package reports

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// Bounds of the DNS lookups of the subdomains mail claims (documented in
// docs/features/reports.md).
const (
	// MaxSubdomainLookups bounds the names one lookup job run resolves;
	// the rest wait for the domain's next report.
	MaxSubdomainLookups = 20
	// SubdomainRecheck is how long a lookup's answer is kept before the
	// name is looked up again.
	SubdomainRecheck = 7 * 24 * time.Hour
	// SubdomainLookupDelay is how long after a report its lookup job runs:
	// a burst of reports shares one run.
	SubdomainLookupDelay = time.Minute
	// subdomainLookupTimeout bounds one lookup.
	subdomainLookupTimeout = 5 * time.Second
	// MaxNonexistentListed bounds the non-existent subdomains the DNS
	// recommendations name.
	MaxNonexistentListed = 20
)

// SubdomainLookupArgs looks up in DNS whether the subdomains mail claimed
// for a domain exist (Service.LookUpSubdomains). The worker lives in
// package jobs.
type SubdomainLookupArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
	Domain   string    `json:"domain"`
}

// Kind implements river.JobArgs.
func (SubdomainLookupArgs) Kind() string { return "dmarc_subdomain_lookup" }

// InsertOpts implements river.JobArgsWithInsertOpts: on the DNS queue,
// one job per domain waiting or running at a time.
func (SubdomainLookupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.DNS, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: queues.ActiveStates}}
}

// queueSubdomainLookup queues the domain's lookup job in the transaction
// that recorded its names, as queueSummary does.
func (s *Service) queueSubdomainLookup(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, domain string) error {
	client := s.River
	if client == nil {
		var err error
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return nil
		}
	}
	opts := SubdomainLookupArgs{}.InsertOpts()
	opts.ScheduledAt = s.now().Add(SubdomainLookupDelay)
	if _, err := client.InsertTx(ctx, tx, SubdomainLookupArgs{DomainID: domainID, Domain: domain}, &opts); err != nil {
		return fmt.Errorf("error queueing the subdomain lookups: %w", err)
	}
	return nil
}

// LookUpSubdomains resolves at most MaxSubdomainLookups of the domain's
// subdomains never looked up or looked up more than SubdomainRecheck ago,
// one A query each: NXDOMAIN means the name does not exist (RFC 8020);
// an answer or NODATA means it does; any other failure leaves the
// previous answer and the name waits for the recheck. Each answer is
// stored on its own, outside any transaction. It returns how many names
// were looked up and how many do not exist.
func (s *Service) LookUpSubdomains(ctx context.Context, domainID uuid.UUID, domain string) (looked, missing int, err error) {
	if s.Resolver == nil {
		return 0, 0, nil
	}
	now := s.now()
	names, err := q.DMARCSubdomainsToLookUp(ctx, s.DB, dbsqlc.DMARCSubdomainsToLookUpParams{
		DomainID: domainID, Domain: domain, StaleBefore: now.Add(-SubdomainRecheck), MaxRows: MaxSubdomainLookups,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("error reading subdomains to look up: %w", err)
	}
	for _, name := range names {
		exists := s.subdomainExists(ctx, name)
		if exists != nil && !*exists {
			missing++
		}
		if err := q.DMARCSubdomainSetDNS(ctx, s.DB, dbsqlc.DMARCSubdomainSetDNSParams{
			DomainID: domainID, Name: name, Exists: exists, CheckedAt: s.now(),
		}); err != nil {
			return looked, missing, fmt.Errorf("error storing the lookup of %s: %w", name, err)
		}
		looked++
	}
	return looked, missing, nil
}

// subdomainExists asks the resolver for name's A records: false on
// NXDOMAIN, true on an answer or NODATA, nil when the lookup failed.
func (s *Service) subdomainExists(ctx context.Context, name string) *bool {
	lctx, cancel := context.WithTimeout(ctx, subdomainLookupTimeout)
	defer cancel()
	_, err := s.Resolver.Query(lctx, name, dns.TypeA)
	var exists bool
	switch {
	case err == nil || (dnscheck.IsNotFound(err) && !dnscheck.IsNXDOMAIN(err)):
		exists = true
	case dnscheck.IsNXDOMAIN(err):
		exists = false
	default:
		return nil
	}
	return &exists
}

// NonexistentSubdomains lists the domain's subdomains DNS said do not
// exist that mail claimed over the readiness window ending at now, busiest
// first, at most MaxNonexistentListed: the input of the np proposal of the
// DNS recommendations.
func NonexistentSubdomains(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, now time.Time) ([]dbsqlc.DMARCNonexistentSubdomainsRow, error) {
	rows, err := q.DMARCNonexistentSubdomains(ctx, db, dbsqlc.DMARCNonexistentSubdomainsParams{
		DomainID: domainID, Since: utcDay(now.Add(-ReadinessWindow)), MaxRows: MaxNonexistentListed,
	})
	if err != nil {
		return nil, fmt.Errorf("error reading non-existent subdomains: %w", err)
	}
	return rows, nil
}

// NPAdvice is the DMARC guidance's np= advice.
type NPAdvice struct {
	Propose    string                 `json:"propose" validate:"required" description:"The np value to add to the DMARC record (reject); empty when there is nothing to add: no mail claimed a subdomain that does not exist, the record has np already, reject already applies to subdomains (sp, else p), or the domain has no DMARC record."`
	Why        string                 `json:"why" validate:"required" description:"Why, as the DNS recommendation says it; empty with propose."`
	Subdomains []NonexistentSubdomain `json:"subdomains" validate:"required" description:"Subdomains mail claimed over the last 30 days that do not exist in DNS (NXDOMAIN), busiest first (at most 20)."`
}

// NonexistentSubdomain is a subdomain mail claimed that does not exist.
type NonexistentSubdomain struct {
	Name     string `json:"name" validate:"required"`
	Messages int64  `json:"messages" validate:"required" description:"Messages claiming it over the last 30 days."`
	Passing  int64  `json:"passing" validate:"required" description:"How many of them passed DMARC."`
}

// npAdvice reads the non-existent subdomains mail claimed over the window
// ending at until and what the DMARC record should add for them
// (dnsfix.ProposeNP, the DNS recommendation's rule).
func npAdvice(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, policy Policy, until time.Time) (NPAdvice, error) {
	rows, err := NonexistentSubdomains(ctx, db, domainID, until)
	if err != nil {
		return NPAdvice{}, err
	}
	a := NPAdvice{Subdomains: make([]NonexistentSubdomain, 0, len(rows))}
	names := make([]dnsfix.NonexistentName, 0, len(rows))
	for _, r := range rows {
		a.Subdomains = append(a.Subdomains, NonexistentSubdomain{Name: r.Name, Messages: r.Messages, Passing: r.Passing})
		names = append(names, dnsfix.NonexistentName{Name: r.Name, Messages: r.Messages, Passing: r.Passing})
	}
	if policy.P != "" {
		a.Propose, a.Why = dnsfix.ProposeNP(policy.P, policy.SP, policy.NP, names)
	}
	return a, nil
}
