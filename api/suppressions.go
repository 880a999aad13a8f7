package api

import (
	"context"
	"errors"
	"time"

	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// SuppressionEntry is one suppressed address.
type SuppressionEntry struct {
	Email      string    `json:"email" validate:"required" description:"The address as first suppressed."`
	Reason     string    `json:"reason" validate:"required" enum:"hard_bounce,complaint,manual"`
	Domain     *string   `json:"domain" validate:"required" description:"The sending domain of the event that caused it; null when unknown."`
	ProviderID *string   `json:"provider_id" validate:"required" description:"The sending provider whose event caused it; null for manual entries."`
	Since      time.Time `json:"since" validate:"required"`
}

// AddSuppressionRequest is the body of POST .../suppressions.
type AddSuppressionRequest struct {
	Email  string  `json:"email" validate:"required,max=320,bare_address" example:"bounced@example.com" description:"One bare address; matched case-insensitively."`
	Domain *string `json:"domain,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"Optional sending domain to record with it."`
}

// SuppressionEmailQuery names an address in the query string.
type SuppressionEmailQuery struct {
	Email string `query:"email" validate:"required,max=320,bare_address" example:"bounced@example.com" description:"The address (matched case-insensitively on the whole address)."`
}

// SuppressionCheck answers whether an address is suppressed.
type SuppressionCheck struct {
	Suppressed bool       `json:"suppressed" validate:"required"`
	Reason     *string    `json:"reason" validate:"required" description:"hard_bounce, complaint or manual; null when not suppressed."`
	Since      *time.Time `json:"since" validate:"required"`
	Domain     *string    `json:"domain" validate:"required"`
}

func suppressionEntry(s providers.Suppression) SuppressionEntry {
	out := SuppressionEntry{Email: s.Email, Reason: s.Reason, Domain: s.Domain, Since: s.Since}
	if s.ProviderID != nil {
		id := s.ProviderID.String()
		out.ProviderID = &id
	}
	return out
}

func checkSuppressionEmail(raw string) (string, error) {
	e, err := providers.CheckEmail(raw)
	if err != nil {
		return "", InvalidField("email", err.Error())
	}
	return e, nil
}

func (s *Server) suppressionRoutes() {
	const base = "/api/accounts/me/suppressions"
	const tag = "suppressions"
	s.ops.AddSuppression = Handle(s.router, Endpoint[AddSuppressionRequest, SuppressionEntry]{
		Method: "POST", Path: base, Status: 201, OperationID: "addSuppression", Tag: tag, Errors: []int{409},
		Summary:     "Suppress an address by hand",
		Description: "Adds a manual entry. Hard bounces and complaints from sending providers add entries on their own; soft bounces never do. An address already suppressed is 409.",
		Call:        s.addSuppression,
	})
	s.ops.RemoveSuppression = Handle(s.router, Endpoint[SuppressionEmailQuery, NoContent]{
		Method: "DELETE", Path: base, Status: 204, OperationID: "removeSuppression", Tag: tag, Errors: []int{404},
		Summary:     "Remove an address from the suppression list",
		Description: "Whatever the reason; 404 when the address is not suppressed.",
		Call:        s.removeSuppression,
	})
	s.ops.CheckSuppression = Handle(s.router, Endpoint[SuppressionEmailQuery, SuppressionCheck]{
		Method: "GET", Path: base + "/check", OperationID: "checkSuppression", Tag: tag,
		Summary:     "Is an address suppressed?",
		Description: "One indexed lookup of the address's lower-case hash. Answers {suppressed, reason, since, domain}.",
		Call:        s.checkSuppression,
	})
}

// addSuppression serves POST /api/accounts/me/suppressions: suppress an address by hand.
func (s *Server) addSuppression(ctx context.Context, req *AddSuppressionRequest) (*SuppressionEntry, error) {
	email, err := checkSuppressionEmail(req.Email)
	if err != nil {
		return nil, err
	}
	var domain *string
	if req.Domain != nil {
		d, err := domainname.Normalize(*req.Domain)
		if err != nil {
			return nil, InvalidField("domain", err.Error())
		}
		domain = &d
	}
	entry, err := providers.AddManual(ctx, s.db, mustCaller(ctx).AccountID, email, domain)
	if errors.Is(err, providers.ErrAlreadySuppressed) {
		return nil, Conflict("%s", err.Error())
	}
	if err != nil {
		return nil, err
	}
	out := suppressionEntry(entry)
	return &out, nil
}

// removeSuppression serves DELETE /api/accounts/me/suppressions: remove an address from the suppression list.
func (s *Server) removeSuppression(ctx context.Context, req *SuppressionEmailQuery) (*NoContent, error) {
	email, err := checkSuppressionEmail(req.Email)
	if err != nil {
		return nil, err
	}
	ok, err := providers.Remove(ctx, s.db, mustCaller(ctx).AccountID, email)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, NotFound("suppression")
	}
	return &NoContent{}, nil
}

// checkSuppression serves GET /api/accounts/me/suppressions/check: whether an address is suppressed.
func (s *Server) checkSuppression(ctx context.Context, req *SuppressionEmailQuery) (*SuppressionCheck, error) {
	email, err := checkSuppressionEmail(req.Email)
	if err != nil {
		return nil, err
	}
	entry, err := providers.CheckSuppression(ctx, s.db, mustCaller(ctx).AccountID, email)
	if err != nil {
		return nil, err
	}
	if entry == nil {
		return &SuppressionCheck{}, nil
	}
	return &SuppressionCheck{Suppressed: true, Reason: &entry.Reason, Since: &entry.Since, Domain: entry.Domain}, nil
}
