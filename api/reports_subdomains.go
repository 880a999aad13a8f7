package api

import (
	"context"
	"fmt"

	"github.com/mailwatch/mailwatch/internal/reports"
)

func (s *Server) dmarcSubdomainRoutes() {
	s.ops.ListDMARCSubdomains = Handle(s.router, Endpoint[DomainPath, reports.SubdomainList]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dmarc/subdomains", OperationID: "listDMARCSubdomains", Tag: "dmarc and tls reports",
		Summary: "Which names mail claims for the domain, from its aggregate reports",
		Description: "The names (the domain itself and its subdomains) that records of the domain's aggregate reports show in header_from, " +
			"with when each was first and last seen, its messages and DMARC pass rate over the last 30 UTC days, and whether it exists " +
			"in DNS (null until looked up: a job looks new subdomains up shortly after their report, and again weekly). " +
			fmt.Sprintf("A report counts its %d busiest names; a domain keeps at most %d names, most recently seen first. ",
				reports.MaxReportSubdomains, reports.MaxKnownSubdomains) +
			"A subdomain seen for the first time raises dmarc_new_subdomain; mail claiming subdomains that do not exist makes the " +
			"DMARC record's recommendation add np=reject.",
		Errors: []int{404},
		Call:   s.listDMARCSubdomains,
	})
}

// listDMARCSubdomains serves GET /api/accounts/me/domains/{domain}/dmarc/subdomains: which names mail claims for the domain.
func (s *Server) listDMARCSubdomains(ctx context.Context, req *DomainPath) (*reports.SubdomainList, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	list, err := reports.Subdomains(ctx, s.reads, d.ID, d.Name, s.now())
	if err != nil {
		return nil, err
	}
	return &list, nil
}
