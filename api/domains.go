package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/health"
)

// Domain is a monitored domain with its latest score and check summary.
type Domain struct {
	ID            uuid.UUID  `json:"id" validate:"required"`
	Domain        string     `json:"domain" validate:"required" description:"The normalised name: IDNA A-labels, lower case, no trailing dot."`
	Tags          []string   `json:"tags" validate:"required" description:"Carried by the domain's events; event subscriptions filter on them (tag_filter)."`
	DKIMSelectors []string   `json:"dkim_selectors" validate:"required" description:"Selectors checked besides the common ones probed."`
	Score         *int       `json:"score" validate:"required" description:"Latest health score (0..100); null until the first complete check."`
	ScoredAt      *time.Time `json:"scored_at" validate:"required"`
	CheckedAt     *time.Time `json:"checked_at" validate:"required" description:"When the latest DNS check started; null until the first check."`
	Checks        CheckMap   `json:"checks" validate:"required" description:"Status of each check in the latest DNS check: pass, warn, fail, none, neutral, temperror or permerror."`
	CreatedAt     time.Time  `json:"created_at" validate:"required"`
	UpdatedAt     time.Time  `json:"updated_at" validate:"required"`
}

// CheckMap maps a check name (spf, dmarc, dkim, mx, mta_sts, tls_rpt, bimi,
// dnssec) to its status.
type CheckMap map[string]string

// DomainDetail is a domain with its full latest results and health report.
type DomainDetail struct {
	Domain
	Results *dnscheck.Results `json:"results,omitempty" description:"The latest DNS check as it came back; absent until the first check."`
	Health  *health.Report    `json:"health,omitempty" description:"The latest health computation with its components; absent until the first complete check."`
}

// CreateDomainRequest is the body of POST /api/accounts/me/domains.
type CreateDomainRequest struct {
	Domain string   `json:"domain" validate:"required,max=1024,domain_name" example:"example.com" description:"A registrable domain or a subdomain; Unicode names are stored as A-labels. Public suffixes are refused."`
	Tags   []string `json:"tags,omitempty" validate:"omitempty,max=20,dive,min=1,max=64"`
}

// UpdateDomainRequest is the body of PATCH /api/accounts/me/domains/{domain}.
type UpdateDomainRequest struct {
	DomainPath
	Tags          *[]string `json:"tags,omitempty" validate:"omitempty,max=20,dive,min=1,max=64" description:"Replaces the tags; [] clears them."`
	DKIMSelectors *[]string `json:"dkim_selectors,omitempty" validate:"omitempty,max=20,dive,min=1,max=200" description:"Replaces the configured DKIM selectors (each a dot-separated host-name label sequence, e.g. s1 or k1.mail); a change triggers a new check."`
}

// DomainPath names one domain of the caller's account.
type DomainPath struct {
	Name string `path:"domain" json:"-" description:"The domain name (any spelling that normalises to it, e.g. Unicode or upper case)."`
}

// ListDomainsRequest pages through the account's domains by name.
type ListDomainsRequest struct {
	After string `query:"after" description:"Return domains whose name sorts after this one (the last name of the previous page)."`
	Limit *int   `query:"limit" validate:"omitempty,min=1,max=500" description:"Page size, 1 to 500; default 100."`
}

// HealthHistoryRequest lists a domain's health history.
type HealthHistoryRequest struct {
	DomainPath
	Limit *int `query:"limit" validate:"omitempty,min=1,max=200" description:"Entries to return, 1 to 200; default 50."`
}

// HealthEntry is one health computation.
type HealthEntry struct {
	Score      int                `json:"score" validate:"required"`
	Components []health.Component `json:"components" validate:"required"`
	Unknown    []string           `json:"unknown" validate:"required" description:"Components left out because their check was never answered."`
	Caps       []health.Cap       `json:"caps" validate:"required"`
	Applied    *health.Cap        `json:"applied,omitempty" description:"The cap that lowered the score, if any."`
	ComputedAt time.Time          `json:"computed_at" validate:"required"`
}

// DNSChange is one difference the live lookup found with the last known
// results; each was also emitted as a dns_record_changed event.
type DNSChange struct {
	Check    string          `json:"check" validate:"required"`
	Critical bool            `json:"critical" validate:"required" description:"A check that passed now fails or is missing."`
	Before   JobsRecordState `json:"before" validate:"required"`
	After    JobsRecordState `json:"after" validate:"required"`
}

// JobsRecordState is one side of a DNSChange: a dns_record_changed
// payload's domains.RecordState. Its name keeps the schema name the OpenAPI
// document has always published for it.
type JobsRecordState domains.RecordState

// DNSLookup is the outcome of a live DNS lookup.
type DNSLookup struct {
	Domain    string            `json:"domain" validate:"required"`
	CheckedAt time.Time         `json:"checked_at" validate:"required"`
	Stored    bool              `json:"stored" validate:"required" description:"False when a check that started later was stored first; these results were then not kept."`
	Results   *dnscheck.Results `json:"results" validate:"required"`
	Changes   []DNSChange       `json:"changes" validate:"required" description:"Differences with the last known results; temporary failures are never changes."`
	Score     *int              `json:"score" validate:"required" description:"The domain's health score after this lookup."`
}

// HealthRecompute acknowledges a queued recomputation.
type HealthRecompute struct {
	Domain string `json:"domain" validate:"required"`
	JobID  int64  `json:"job_id" validate:"required" description:"The River job that recomputes the score."`
}

func domainFromRow(id uuid.UUID, name string, tags, selectors []string, score *int32, scoredAt, checkedAt *time.Time,
	status json.RawMessage, created, updated time.Time,
) Domain {
	d := Domain{
		ID: id, Domain: name, Tags: nonNil(tags), DKIMSelectors: nonNil(selectors),
		ScoredAt: utcPtr(scoredAt), CheckedAt: utcPtr(checkedAt), Checks: CheckMap{},
		CreatedAt: created.UTC(), UpdatedAt: updated.UTC(),
	}
	if score != nil {
		n := int(*score)
		d.Score = &n
	}
	if len(status) > 0 {
		_ = json.Unmarshal(status, &d.Checks)
	}
	return d
}

func domainFromFullRow(r dbsqlc.Domain) Domain {
	return domainFromRow(r.ID, r.Name, r.Tags, r.DkimSelectors, r.Score, r.ScoredAt, r.CheckedAt, r.CheckStatus, r.CreatedAt, r.UpdatedAt)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// domainError maps the domains rules' errors to their statuses.
func domainError(err error) error {
	var field *domains.FieldError
	var exists *domains.ExistsError
	var plan *billing.LimitError
	switch {
	case errors.Is(err, domains.ErrNotFound), errors.Is(err, domains.ErrDomainGone):
		return NotFound("domain")
	case errors.As(err, &field):
		return InvalidField(field.Field, field.Message)
	case errors.As(err, &exists):
		return Conflict("%s", exists.Error())
	case errors.As(err, &plan):
		return &Error{Status: http.StatusPaymentRequired, Detail: plan.Error()}
	}
	return err
}

// domainPathName is a {domain} path value as a name (unescaped once more).
func domainPathName(raw string) string {
	if s, err := url.PathUnescape(raw); err == nil {
		return s
	}
	return raw
}

// getDomain reads one of the caller's domains or answers 404.
func (s *Server) getDomain(ctx context.Context, db dbutil.Executor, raw string) (dbsqlc.Domain, error) {
	row, err := domains.Get(ctx, db, mustCaller(ctx).AccountID, domainPathName(raw))
	return row, domainError(err)
}

func (s *Server) domainRoutes() {
	const tag = "domains"
	s.ops.CreateDomain = Handle(s.router, Endpoint[CreateDomainRequest, Domain]{
		Method: "POST", Path: "/api/accounts/me/domains", Status: 201, OperationID: "createDomain", Tag: tag,
		Summary: "Monitor a domain",
		Description: "Normalises the name (IDNA to ASCII, lower case, no trailing dot) and refuses public suffixes (422). " +
			"A domain already monitored by the account is 409. Its first DNS check and health score are queued with it, and its " +
			"reporting addresses (GET .../reporting-address) are minted with it, so they receive reports at once.",
		Errors: []int{402, 409},
		Call:   s.createDomain,
	})
	s.ops.ListDomains = Handle(s.router, Endpoint[ListDomainsRequest, []Domain]{
		Method: "GET", Path: "/api/accounts/me/domains", OperationID: "listDomains", Tag: tag,
		Summary:     "List monitored domains",
		Description: "Sorted by name, with each domain's latest score and check statuses. Page with after=<last name>.",
		Call:        s.listDomains,
	})
	s.ops.GetDomain = Handle(s.router, Endpoint[DomainPath, DomainDetail]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}", OperationID: "getDomain", Tag: tag,
		Summary: "Get a domain with its latest DNS results and health report",
		Errors:  []int{404},
		Call:    s.getDomainDetail,
	})
	s.ops.UpdateDomain = Handle(s.router, Endpoint[UpdateDomainRequest, Domain]{
		Method: "PATCH", Path: "/api/accounts/me/domains/{domain}", OperationID: "updateDomain", Tag: tag,
		Summary:     "Change a domain's tags or DKIM selectors",
		Description: "Fields left out are unchanged. Changing the DKIM selectors queues a new check whose DKIM result is a new baseline (not reported as a DNS change).",
		Errors:      []int{404},
		Call:        s.updateDomain,
	})
	s.ops.DeleteDomain = Handle(s.router, Endpoint[DomainPath, NoContent]{
		Method: "DELETE", Path: "/api/accounts/me/domains/{domain}", Status: 204, OperationID: "deleteDomain", Tag: tag,
		Summary: "Stop monitoring a domain", Description: "Deletes the domain with its results and health history; its events stay.",
		Errors: []int{404},
		Call:   s.deleteDomain,
	})
	s.ops.LookupDomainDNS = Handle(s.router, Endpoint[DomainPath, DNSLookup]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/dns", OperationID: "lookupDomainDNS", Tag: tag,
		Summary: "Run every DNS check now",
		Description: "Runs SPF, DMARC, DKIM, MX, MTA-STS, TLS-RPT, BIMI and DNSSEC concurrently within a 10 s budget and " +
			"stores the result as the domain's latest snapshot, exactly as a periodic check does: changes from the last known " +
			"results emit dns_record_changed and the health score is recomputed. A timeout or SERVFAIL is temperror, never a change.",
		Errors: []int{404},
		Call:   s.lookupDomainDNS,
	})
	Handle(s.router, Endpoint[DomainPath, HealthRecompute]{
		Method: "POST", Path: "/api/accounts/me/domains/{domain}/health/recompute", Status: 202, OperationID: "recomputeDomainHealth", Tag: tag,
		Summary:     "Recompute the health score",
		Description: "Queues a recomputation from the stored results; it appends to the health history and may emit health_score_changed.",
		Errors:      []int{404},
		Call:        s.recomputeDomainHealth,
	})
	s.ops.ListDomainHealth = Handle(s.router, Endpoint[HealthHistoryRequest, []HealthEntry]{
		Method: "GET", Path: "/api/accounts/me/domains/{domain}/health", OperationID: "listDomainHealth", Tag: tag,
		Summary: "A domain's health score history", Description: "Newest first.",
		Errors: []int{404},
		Call:   s.listDomainHealth,
	})
}

// createDomain serves POST /api/accounts/me/domains: monitor a domain.
func (s *Server) createDomain(ctx context.Context, req *CreateDomainRequest) (*Domain, error) {
	row, err := domains.Create(ctx, s.db, s.deps.River, s.reportService(), mustCaller(ctx).AccountID,
		domains.New{Name: req.Domain, Tags: req.Tags}, s.deps.DefaultPlan, s.now())
	if err != nil {
		return nil, domainError(err)
	}
	d := domainFromFullRow(row)
	return &d, nil
}

// listDomains serves GET /api/accounts/me/domains: list monitored domains.
func (s *Server) listDomains(ctx context.Context, req *ListDomainsRequest) (*[]Domain, error) {
	limit := domains.DefaultPageSize
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := domains.List(ctx, s.db, mustCaller(ctx).AccountID, req.After, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Domain, len(rows))
	for i, r := range rows {
		out[i] = domainFromRow(r.ID, r.Name, r.Tags, r.DkimSelectors, r.Score, r.ScoredAt, r.CheckedAt, r.CheckStatus, r.CreatedAt, r.UpdatedAt)
	}
	return &out, nil
}

func (s *Server) getDomainDetail(ctx context.Context, req *DomainPath) (*DomainDetail, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	out := DomainDetail{Domain: domainFromFullRow(row)}
	if len(row.Results) > 0 {
		out.Results = &dnscheck.Results{}
		if err := json.Unmarshal(row.Results, out.Results); err != nil {
			return nil, fmt.Errorf("error decoding results of %s: %w", row.Name, err)
		}
	}
	if len(row.Health) > 0 {
		out.Health = &health.Report{}
		if err := json.Unmarshal(row.Health, out.Health); err != nil {
			return nil, fmt.Errorf("error decoding health of %s: %w", row.Name, err)
		}
	}
	return &out, nil
}

// updateDomain serves PATCH /api/accounts/me/domains/{domain}: change a domain's tags or DKIM selectors.
func (s *Server) updateDomain(ctx context.Context, req *UpdateDomainRequest) (*Domain, error) {
	row, err := domains.Update(ctx, s.db, s.deps.River, mustCaller(ctx).AccountID, domainPathName(req.Name),
		domains.Change{Tags: req.Tags, DKIMSelectors: req.DKIMSelectors})
	if err != nil {
		return nil, domainError(err)
	}
	d := domainFromFullRow(row)
	return &d, nil
}

// deleteDomain serves DELETE /api/accounts/me/domains/{domain}: stop monitoring a domain.
func (s *Server) deleteDomain(ctx context.Context, req *DomainPath) (*NoContent, error) {
	if err := domains.Delete(ctx, s.db, mustCaller(ctx).AccountID, domainPathName(req.Name)); err != nil {
		return nil, domainError(err)
	}
	return &NoContent{}, nil
}

func (s *Server) lookupDomainDNS(ctx context.Context, req *DomainPath) (*DNSLookup, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	if s.deps.Resolver == nil {
		return nil, Unavailable("DNS checks are not configured on this server")
	}
	run, err := s.domainChecker().Run(ctx, row, nil)
	if err != nil {
		return nil, domainError(err)
	}
	resp := &DNSLookup{Domain: row.Name, CheckedAt: run.StartedAt.UTC(), Stored: run.Applied, Results: run.Results, Changes: []DNSChange{}}
	for _, ch := range run.Changes {
		c := DNSChange{Check: ch.Check, Critical: ch.Critical}
		c.Before.Status, c.Before.Records = ch.Before.Status, nonNil(ch.Before.Records)
		c.After.Status, c.After.Records = ch.After.Status, nonNil(ch.After.Records)
		resp.Changes = append(resp.Changes, c)
	}
	if run.Domain.Score != nil {
		n := int(*run.Domain.Score)
		resp.Score = &n
	}
	return resp, nil
}

// domainChecker is the domains.Checker of this server: the live lookup
// runs the check job's sequence.
func (s *Server) domainChecker() *domains.Checker {
	return &domains.Checker{
		DB: s.db, Resolver: s.deps.Resolver, MTASTS: s.deps.MTASTSClient, Signer: s.reportService().Signer,
		Emitter: s.deps.Emitter, Fixes: s.deps.DNSFix, Logger: s.logger, Now: s.now,
	}
}

// recomputeDomainHealth serves POST /api/accounts/me/domains/{domain}/health/recompute: recompute the health score.
func (s *Server) recomputeDomainHealth(ctx context.Context, req *DomainPath) (*HealthRecompute, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	id, err := domains.QueueRecompute(ctx, s.db, s.deps.River, row.ID)
	if err != nil {
		return nil, err
	}
	return &HealthRecompute{Domain: row.Name, JobID: id}, nil
}

// listDomainHealth serves GET /api/accounts/me/domains/{domain}/health: a domain's health score history.
func (s *Server) listDomainHealth(ctx context.Context, req *HealthHistoryRequest) (*[]HealthEntry, error) {
	row, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	limit := domains.DefaultHistoryLength
	if req.Limit != nil {
		limit = *req.Limit
	}
	entries, err := domains.History(ctx, s.db, row.ID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]HealthEntry, len(entries))
	for i, e := range entries {
		rep := e.Report
		out[i] = HealthEntry{
			Score: e.Score, Components: rep.Components, Unknown: nonNil(rep.Unknown), Caps: rep.Caps,
			Applied: rep.Applied, ComputedAt: e.ComputedAt.UTC(),
		}
		if out[i].Components == nil {
			out[i].Components = []health.Component{}
		}
		if out[i].Caps == nil {
			out[i].Caps = []health.Cap{}
		}
	}
	return &out, nil
}

// fillDashboardDomains fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardDomains(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	row, err := domains.Summary(ctx, s.db, account)
	if err != nil {
		return err
	}
	out.Domains.Total, out.Domains.AtRisk = row.Total, row.AtRisk
	if row.Scored > 0 {
		avg := row.AverageScore
		out.Domains.AverageScore = &avg
	}
	return nil
}
