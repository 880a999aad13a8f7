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
