package dnscheck

import (
	"context"

	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dmarc"
)

// DNSSECResult is the DNSSEC check's result.
type DNSSECResult struct {
	Result
	// Authenticated is the resolver's AD bit for the domain's zone.
	Authenticated bool `json:"authenticated"`
	// Zone is the name whose SOA was asked: the domain, or its
	// organizational domain when the domain is not a zone apex.
	Zone string `json:"zone,omitempty"`
}

// CheckDNSSEC asks the resolver for the SOA of the domain (or of its
// organizational domain when the domain has none) and reports the AD bit:
// set only when a validating resolver verified the answer with DNSSEC (RFC
// 4035 section 3.2.3). The result is only as good as the resolver: one that
// does not validate never sets AD. When AD is not set but the zone has DS
// records, the resolver is probably not validating. Status: pass, none,
// warn (DS present, AD not set), temperror.
func CheckDNSSEC(ctx context.Context, r Resolver, domain string) *DNSSECResult {
	res := &DNSSECResult{}
	defer res.finish()
	zone := domain
	a, err := r.Query(ctx, zone, dns.TypeSOA)
	if IsNotFound(err) {
		if org := dmarc.OrganizationalDomain(domain); org != domain {
			zone = org
			a, err = r.Query(ctx, zone, dns.TypeSOA)
		}
	}
	res.Zone = zone
	switch {
	case IsNotFound(err):
		res.Status = StatusNone
		res.errorf("no SOA record for %s: the domain does not appear to exist", domain)
		return res
	case err != nil:
		res.Status = StatusTemperror
		res.errorf("querying the SOA of %s failed: %v", zone, err)
		return res
	}
	res.Authenticated = a.Authenticated
	if a.Authenticated {
		res.Status = StatusPass
		res.Records = append(res.Records, zone+": AD (authenticated data)")
		return res
	}
	ds, err := r.Query(ctx, zone, dns.TypeDS)
	if err == nil && len(ds.Records) > 0 {
		res.Status = StatusPass
		for _, rr := range ds.Records {
			res.Records = append(res.Records, rr.String())
		}
		res.warnf("%s has DS records but the resolver did not validate the answer; check that the resolver validates DNSSEC", zone)
		return res
	}
	res.Status = StatusNone
	res.errorf("%s is not signed with DNSSEC (the resolver did not set the AD bit)", zone)
	res.instructf("Enable DNSSEC at your DNS provider and publish the DS record at your registrar.")
	return res
}
