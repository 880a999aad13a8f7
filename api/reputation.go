package api

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
	Origin    string             `json:"origin" validate:"required" enum:"report,sender,pinned,domain,auth_domain" description:"report: a source IP of the domain's compliant or forwarded mail in the last 14 days of DMARC reports; sender: a known sender's IP (its reverse DNS names a sending service) whose mail in that window failed DMARC; pinned: an address of a range pinned on the domain; domain: the domain itself, for domain lists; auth_domain: a return-path or DKIM signing domain of those reports, for domain lists."`
	Messages  int64              `json:"messages" validate:"required" description:"Messages the IP carried (or that named the return-path or DKIM domain) in the last 7 days of reports."`
	Share     float64            `json:"share" validate:"required" description:"Share (0 to 1) of the domain's last 7 days of mail those messages are."`
	CheckedAt *time.Time         `json:"checked_at" validate:"required" description:"When a list last answered for it; null before the first check."`
	Listings  []BlocklistListing `json:"listings" validate:"required"`
}

// Reputation is a domain's blocklist state.
type Reputation struct {
	Domain      string          `json:"domain" validate:"required"`
	ListedShare float64         `json:"listed_share" validate:"required" description:"Share of the domain's last 7 days of mail carried by IPs listed now (informational listings left out)."`
	Targets     []WatchedTarget `json:"targets" validate:"required" description:"Every watched IP and domain, most mail first."`
	Pins        []ReputationPin `json:"pins" validate:"required" description:"The IP ranges pinned on the domain, oldest first; each address is a target of origin pinned."`
}

// ReputationPin is an IP range pinned on a domain.
type ReputationPin struct {
	CIDR      string    `json:"cidr" validate:"required" example:"192.0.2.8/30" description:"The range, masked (host bits cleared)."`
	Note      string    `json:"note" validate:"required" description:"The note given with it; empty when none."`
	Addresses int       `json:"addresses" validate:"required" description:"The addresses it covers, each watched."`
	CreatedAt time.Time `json:"created_at" validate:"required"`
}

// AddReputationPinRequest is the body of POST .../reputation/pins.
type AddReputationPinRequest struct {
	DomainPath
	CIDR string  `json:"cidr" validate:"required,max=64" example:"192.0.2.8/30" description:"An IPv4 prefix of /24 or longer, an IPv6 prefix of /120 or longer, or one address."`
	Note *string `json:"note,omitempty" validate:"omitempty,max=200" description:"What the range is, for the people who read the list."`
}

// ReputationPinQuery names a pinned range in the query string.
type ReputationPinQuery struct {
	DomainPath
	CIDR string `query:"cidr" validate:"required,max=64" example:"192.0.2.8/30" description:"The pinned range (any spelling of it, e.g. with host bits set)."`
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
			"reports, its known senders' IPs in that window even when their mail fails DMARC, and the addresses of its pins) and " +
			"the domain itself with the reports' busiest return-path and DKIM signing domains, with their current listings, " +
			"share of mail, last check and delisting page, and the pins. " +
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
	s.ops.AddReputationPin = Handle(s.router, Endpoint[AddReputationPinRequest, ReputationPin]{
		Method: "POST", Path: base + "/pins", Status: 201, OperationID: "addReputationPin", Tag: tag, Errors: []int{404, 409},
		Summary: "Pin an IP range to watch on the blocklists",
		Description: "Every address of the range is watched (origin pinned), whether or not the reports name it, and gets its " +
			"share of the mail when they do. A pin holds at most " + strconv.Itoa(reputation.MaxPinAddresses) + " addresses (IPv4 /24 " +
			"or longer, IPv6 /120 or longer); a domain has at most " + strconv.Itoa(reputation.MaxPins) + " pins and " +
			strconv.Itoa(reputation.MaxPinnedAddresses) + " pinned addresses: beyond, 422. A range pinned already, or overlapping " +
			"a pin, is 409. A check of the domain is queued with it.",
		Call: s.addReputationPin,
	})
	s.ops.RemoveReputationPin = Handle(s.router, Endpoint[ReputationPinQuery, NoContent]{
		Method: "DELETE", Path: base + "/pins", Status: 204, OperationID: "removeReputationPin", Tag: tag, Errors: []int{404},
		Summary: "Remove a pinned IP range",
		Description: "Its addresses stop being watched, unless the reports make them sources of the domain; their current " +
			"listings end without a blocklist_delisted event (past listings stay in the data API). 404 when the domain has no such pin.",
		Call: s.removeReputationPin,
	})
}

func reputationPin(p reputation.Pin) ReputationPin {
	return ReputationPin{CIDR: p.CIDR, Note: p.Note, Addresses: p.Addresses, CreatedAt: p.CreatedAt}
}

// addReputationPin serves POST /api/accounts/me/domains/{domain}/reputation/pins: pin an IP range to watch on the blocklists.
func (s *Server) addReputationPin(ctx context.Context, req *AddReputationPinRequest) (*ReputationPin, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	note := ""
	if req.Note != nil {
		note = *req.Note
	}
	pin, err := reputation.AddPin(ctx, s.db, s.deps.River, row.AccountID, row.ID, row.Name, req.CIDR, note, time.Now())
	var invalid *reputation.PinError
	switch {
	case errors.As(err, &invalid):
		return nil, InvalidField(invalid.Field, invalid.Message)
	case errors.Is(err, reputation.ErrPinConflict):
		return nil, Conflict("%s", strings.TrimPrefix(err.Error(), reputation.ErrPinConflict.Error()+": "))
	case err != nil:
		return nil, err
	}
	out := reputationPin(pin)
	return &out, nil
}

// removeReputationPin serves DELETE /api/accounts/me/domains/{domain}/reputation/pins: remove a pinned IP range.
func (s *Server) removeReputationPin(ctx context.Context, req *ReputationPinQuery) (*NoContent, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	err = reputation.DeletePin(ctx, s.db, row.AccountID, row.ID, row.Name, req.CIDR, time.Now())
	if errors.Is(err, reputation.ErrPinNotFound) {
		return nil, NotFound("pin")
	}
	if err != nil {
		return nil, err
	}
	return &NoContent{}, nil
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
	out := Reputation{Domain: row.Name, ListedShare: st.ListedShare, Targets: make([]WatchedTarget, len(st.Targets)),
		Pins: make([]ReputationPin, len(st.Pins))}
	for i, p := range st.Pins {
		out.Pins[i] = reputationPin(p)
	}
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
