package api

import (
	"context"
	"errors"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// MXSetup is a custom inbound subdomain and its verification.
type MXSetup struct {
	Domain        string            `json:"domain" validate:"required"`
	Name          string            `json:"name" validate:"required" description:"The inbound subdomain, e.g. reports.example.com."`
	State         string            `json:"state" validate:"required" enum:"pending,verified,failed,lost" description:"pending until the records verify; failed when still unverified 72 h after setup; lost when a verified setup's records went away (mx_verification_lost)."`
	Records       []dnsfix.MXRecord `json:"records" validate:"required" description:"The records to publish: an MX to mailwatch's inbound host and the ownership TXT."`
	Problems      []string          `json:"problems" validate:"required" description:"What the last verification found wrong."`
	LastCheckedAt *time.Time        `json:"last_checked_at" validate:"required"`
	VerifiedAt    *time.Time        `json:"verified_at" validate:"required"`
	CreatedAt     time.Time         `json:"created_at" validate:"required"`
}

// MXSetupRequest is the body of POST .../mx-setup.
type MXSetupRequest struct {
	Name      string `path:"domain" json:"-"`
	Subdomain string `json:"subdomain" validate:"required,max=253" description:"A label (\"reports\") or a full name below the domain."`
}

func (s *Server) mxFromRow(d dbsqlc.Domain, m dbsqlc.MxSetup) MXSetup {
	return MXSetup{Domain: d.Name, Name: m.Name, State: m.State, Records: dnsfix.MXRecords(s.mxConfig(), m), Problems: nonNil(m.Problems),
		LastCheckedAt: whUTC(m.LastCheckedAt), VerifiedAt: whUTC(m.VerifiedAt), CreatedAt: m.CreatedAt.UTC()}
}

func (s *Server) mxConfig() dnsfix.MXConfig {
	if s.deps.DNSFix != nil && s.deps.DNSFix.MX.Host != "" {
		return s.deps.DNSFix.MX
	}
	return dnsfix.MXConfig{Host: s.deps.InboundDomain}
}

func (s *Server) mxRoutes() {
	const base = "/api/accounts/me/domains/{domain}"
	const tag = "MX setup"
	Handle(s.router, Endpoint[MXSetupRequest, MXSetup]{
		Method: "POST", Path: base + "/mx-setup", Status: 201, OperationID: "setupMX", Tag: tag, Errors: []int{404},
		Summary: "Receive reports and receivers' mail at your own subdomain",
		Description: "Returns the MX and ownership TXT records to publish; the setup starts pending. Asking again for the same " +
			"subdomain returns the same records and state; another subdomain replaces the setup. A periodic job verifies it.",
		Call: s.setupMX,
	})
	Handle(s.router, Endpoint[DomainPath, MXSetup]{
		Method: "GET", Path: base + "/mx-setup", OperationID: "getMXSetup", Tag: tag, Errors: []int{404},
		Summary: "The domain's MX setup",
		Call:    s.getMXSetup,
	})
	Handle(s.router, Endpoint[DomainPath, MXSetup]{
		Method: "POST", Path: base + "/mx-verify", OperationID: "verifyMX", Tag: tag, Errors: []int{404},
		Summary: "Verify the MX setup now",
		Description: "Checks that the subdomain's MX points to mailwatch's inbound host with no equal or better foreign MX and no " +
			"null MX, that the name is not a CNAME, and that the TXT token matches. A DNS timeout is 503 and changes nothing.",
		Call: s.verifyMX,
	})
}

// setupMX serves POST /api/accounts/me/domains/{domain}/mx-setup: receive reports and receivers' mail at your own subdomain.
func (s *Server) setupMX(ctx context.Context, req *MXSetupRequest) (*MXSetup, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	m, err := dnsfix.SetupMX(ctx, s.db, d, req.Subdomain)
	if err != nil {
		return nil, mxError(err)
	}
	out := s.mxFromRow(d, m)
	return &out, nil
}

// getMXSetup serves GET /api/accounts/me/domains/{domain}/mx-setup: the domain's MX setup.
func (s *Server) getMXSetup(ctx context.Context, req *DomainPath) (*MXSetup, error) {
	d, m, err := s.mxSetup(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	out := s.mxFromRow(d, m)
	return &out, nil
}

// verifyMX serves POST /api/accounts/me/domains/{domain}/mx-verify: verify the MX setup now.
func (s *Server) verifyMX(ctx context.Context, req *DomainPath) (*MXSetup, error) {
	d, m, err := s.mxSetup(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	if s.deps.Resolver == nil {
		return nil, Unavailable("DNS checks are not configured on this server")
	}
	m, err = dnsfix.VerifyMX(ctx, s.db, s.deps.Resolver, s.deps.Emitter, s.mxConfig(), m, s.now)
	if err != nil {
		return nil, mxError(err)
	}
	out := s.mxFromRow(d, m)
	return &out, nil
}

// mxSetup reads the caller's domain and its MX setup.
func (s *Server) mxSetup(ctx context.Context, domain string) (dbsqlc.Domain, dbsqlc.MxSetup, error) {
	d, err := s.getDomain(ctx, s.db, domain)
	if err != nil {
		return d, dbsqlc.MxSetup{}, err
	}
	m, err := dnsfix.GetMXSetup(ctx, s.db, d.ID)
	return d, m, mxError(err)
}

// mxError maps the MX setup rules' errors to their statuses.
func mxError(err error) error {
	switch {
	case errors.Is(err, dnsfix.ErrNoMXSetup):
		return NotFound("MX setup")
	case errors.Is(err, dnsfix.ErrTemporary):
		// The cause names our resolver's address: log it, say what happened.
		e := Unavailable("a DNS lookup for the setup failed temporarily; nothing changed, retry later")
		e.Cause = err
		return e
	}
	return dnsFixError(err)
}
