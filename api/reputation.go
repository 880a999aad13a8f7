package api

import (
	"context"
	"time"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/reputation"
)

// BlocklistCode is one answer of a list and what it means.
type BlocklistCode struct {
	Code          string `json:"code" validate:"required" description:"The A record the list answered, e.g. 127.0.0.2."`
	Name          string `json:"name" validate:"required" description:"The sub-list, e.g. SBL; empty for an undocumented code."`
	Meaning       string `json:"meaning" validate:"required"`
	Informational bool   `json:"informational" validate:"required" description:"A policy statement (e.g. Spamhaus PBL), not a sign of abuse."`
}

// BlocklistListing is a current listing of a watched IP or domain.
type BlocklistListing struct {
	Zone          string          `json:"zone" validate:"required"`
	List          string          `json:"list" validate:"required"`
	Codes         []BlocklistCode `json:"codes" validate:"required"`
	Reason        string          `json:"reason" validate:"required" description:"The list's TXT record for the entry; empty when it has none."`
	ListedAt      time.Time       `json:"listed_at" validate:"required"`
	Informational bool            `json:"informational" validate:"required" description:"Reported, but raises no alert and no cap."`
	DelistURL     string          `json:"delist_url" validate:"required" description:"Where to ask for removal; empty when the list has no such page."`
}

// WatchedTarget is an IP or domain watched on the blocklists.
type WatchedTarget struct {
	Target    string             `json:"target" validate:"required"`
	Kind      string             `json:"kind" validate:"required" enum:"ip,domain"`
	Origin    string             `json:"origin" validate:"required" enum:"report,pinned,domain" description:"report: a source IP of the domain's compliant or forwarded mail in the last 14 days of DMARC reports; domain: the domain itself, for domain lists."`
	Messages  int64              `json:"messages" validate:"required" description:"Messages the IP carried in the last 7 days of reports."`
	Share     float64            `json:"share" validate:"required" description:"Share (0 to 1) of the domain's last 7 days of mail the IP carried."`
	CheckedAt *time.Time         `json:"checked_at" validate:"required" description:"When a list last answered for it; null before the first check."`
	Listings  []BlocklistListing `json:"listings" validate:"required"`
}

// Reputation is a domain's blocklist state.
type Reputation struct {
	Domain      string          `json:"domain" validate:"required"`
	ListedShare float64         `json:"listed_share" validate:"required" description:"Share of the domain's last 7 days of mail carried by IPs listed now (informational listings left out)."`
	Targets     []WatchedTarget `json:"targets" validate:"required" description:"Every watched IP and domain, most mail first."`
}

// ReputationCheck is the answer of POST .../reputation/check.
type ReputationCheck struct {
	Domain string `json:"domain" validate:"required"`
	JobID  int64  `json:"job_id" validate:"required" description:"The River job that checks the domain."`
}

func (s *Server) reputationRoutes() {
	const base = "/api/accounts/me/domains/{domain}/reputation"
	const tag = "reputation"
	s.ops.GetDomainReputation = Handle(s.router, Endpoint[DomainPath, Reputation]{
		Method: "GET", Path: base, OperationID: "getDomainReputation", Tag: tag, Errors: []int{404},
		Summary: "The domain's IPs and name on DNS blocklists",
		Description: "Every watched IP (the sources of the domain's compliant or forwarded mail in the last 14 days of DMARC " +
			"reports) and the domain itself, with their current listings, share of mail, last check and delisting page. " +
			"A periodic job checks every domain; lookups are shared by every account and cached for the list's TTL.",
		Call: s.getDomainReputation,
	})
	Handle(s.router, Endpoint[DomainPath, ReputationCheck]{
		Method: "POST", Path: base + "/check", Status: 202, OperationID: "checkDomainReputation", Tag: tag, Errors: []int{404},
		Summary: "Check the domain on the blocklists now",
		Description: "Queues a check (reused when one is already queued): the watch set is computed again from the reports and " +
			"every expired (list, target) answer is looked up. Listings and delistings emit blocklist_listed and blocklist_delisted.",
		Call: s.checkDomainReputation,
	})
}

// getDomainReputation serves GET /api/accounts/me/domains/{domain}/reputation: the domain's IPs and name on DNS blocklists.
func (s *Server) getDomainReputation(ctx context.Context, req *DomainPath) (*Reputation, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	// The catalog names the lists and their delisting pages; a zone of
	// BLOCKLIST_ZONES it does not know is named by its zone.
	st, err := reputation.Read(ctx, s.db, blocklist.Catalog(), row.AccountID, row.ID)
	if err != nil {
		return nil, err
	}
	out := Reputation{Domain: row.Name, ListedShare: st.ListedShare, Targets: make([]WatchedTarget, len(st.Targets))}
	for i, t := range st.Targets {
		ls := make([]BlocklistListing, len(t.Listings))
		for j, l := range t.Listings {
			codes := make([]BlocklistCode, len(l.Codes))
			for k, c := range l.Codes {
				codes[k] = BlocklistCode(c)
			}
			ls[j] = BlocklistListing{Zone: l.Zone, List: l.List, Codes: codes, Reason: l.Reason, ListedAt: l.ListedAt,
				Informational: l.Informational, DelistURL: l.DelistURL}
		}
		out.Targets[i] = WatchedTarget{Target: t.Target, Kind: t.Kind, Origin: t.Origin, Messages: t.Messages, Share: t.Share,
			CheckedAt: whUTC(t.CheckedAt), Listings: ls}
	}
	return &out, nil
}

// checkDomainReputation serves POST /api/accounts/me/domains/{domain}/reputation/check: check the domain on the blocklists now.
func (s *Server) checkDomainReputation(ctx context.Context, req *DomainPath) (*ReputationCheck, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	id, err := reputation.QueueCheck(ctx, s.db, s.deps.River, row.ID)
	if err != nil {
		return nil, err
	}
	return &ReputationCheck{Domain: row.Name, JobID: id}, nil
}
