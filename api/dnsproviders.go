package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// DNSProvider is a DNS connection as the API shows it: never its secrets.
type DNSProvider struct {
	ID         uuid.UUID         `json:"id" validate:"required"`
	Kind       string            `json:"kind" validate:"required" enum:"rfc2136,cloudflare,route53"`
	Label      string            `json:"label" validate:"required"`
	Config     map[string]any    `json:"config" validate:"required" description:"The non-secret settings: server, tsig_key_name and tsig_algorithm (rfc2136); api_token_hint (cloudflare: the token's last 4 characters); access_key_id and hosted_zone_id (route53). Secrets are stored encrypted and never shown."`
	Links      []DNSProviderLink `json:"links" validate:"required"`
	VerifiedAt time.Time         `json:"verified_at" validate:"required" description:"When the provider last accepted the credentials."`
	CreatedAt  time.Time         `json:"created_at" validate:"required"`
	UpdatedAt  time.Time         `json:"updated_at" validate:"required"`
}

// DNSProviderLink is a domain written through a connection.
type DNSProviderLink struct {
	Domain   string    `json:"domain" validate:"required"`
	Zone     string    `json:"zone" validate:"required" description:"The zone found at the provider that holds the domain."`
	ZoneID   string    `json:"zone_id" validate:"required" description:"The provider's id of the zone (Cloudflare zone id, Route 53 hosted zone id; the zone name for rfc2136)."`
	LinkedAt time.Time `json:"linked_at" validate:"required"`
}

// CreateDNSProviderRequest is the body of POST .../dns-providers.
type CreateDNSProviderRequest struct {
	Kind   string         `json:"kind" validate:"required,oneof=rfc2136 cloudflare route53" description:"rfc2136 (dynamic update with a TSIG key), cloudflare (API token) or route53 (access key)."`
	Label  string         `json:"label" validate:"required,max=100,not_blank" description:"A name unique among the account's connections."`
	Config map[string]any `json:"config" validate:"required" description:"rfc2136: {server (host[:port]), tsig_key_name, tsig_algorithm (hmac-sha256 default, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1), tsig_secret (base64)}; cloudflare: {api_token} (Zone:Read and DNS:Edit); route53: {access_key_id, secret_access_key, hosted_zone_id?}."`
}

// UpdateDNSProviderRequest is the body of PATCH .../dns-providers/{id}.
type UpdateDNSProviderRequest struct {
	ID     uuid.UUID      `path:"id" format:"uuid"`
	Label  *string        `json:"label,omitempty" validate:"omitempty,max=100,not_blank"`
	Config map[string]any `json:"config,omitempty" description:"A whole new configuration of the same kind, verified like at creation."`
}

// DNSProviderPath names one connection.
type DNSProviderPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// DNSProviderLinkRequest is the body of POST and DELETE .../dns-providers/{id}/links.
type DNSProviderLinkRequest struct {
	ID     uuid.UUID `path:"id" format:"uuid"`
	Domain string    `json:"domain" validate:"required,max=253,domain_name" example:"example.com" description:"One of the account's monitored domains."`
}

// ForceRequestBody documents the body of the DELETE route too: it names the
// domain to unlink.
func (DNSProviderLinkRequest) ForceRequestBody() {}

func (s *Server) dnsFixEnv() (*dnsfix.Env, error) {
	if s.deps.DNSFix == nil || s.deps.DNSFix.Env == nil {
		return nil, Unavailable("DNS connections are not configured on this server")
	}
	return s.deps.DNSFix.Env, nil
}

// dnsFixError maps the dnsfix package's errors to API errors.
func dnsFixError(err error) error {
	var (
		fe *dnsfix.FieldError
		ve *dnsfix.VerifyError
		ce *dnsfix.ConflictError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return InvalidField(fe.Field, fe.Message)
	case errors.As(err, &ve):
		field := "config"
		if ve.What == "zone" {
			field = "domain"
		}
		e := Invalid(FieldError{Field: field, Message: ve.Error()})
		e.Detail = fmt.Sprintf("the DNS provider refused: %s: %s", ve.What, ve.Message)
		return e
	case errors.As(err, &ce):
		cur, _ := json.Marshal(ce.Current)
		return &Error{Status: http.StatusConflict, Detail: "the record changed since the recommendation was computed; it now holds " + string(cur)}
	case errors.Is(err, dnsfix.ErrNotFound):
		return NotFound("resource")
	case errors.Is(err, dnsfix.ErrLabelTaken), errors.Is(err, dnsfix.ErrTooMany), errors.Is(err, dnsfix.ErrState):
		return Conflict("%s", err.Error())
	}
	return err
}

func (s *Server) dnsProviderFromRow(ctx context.Context, r dbsqlc.DnsConnection) (DNSProvider, error) {
	out := DNSProvider{ID: r.ID, Kind: r.Kind, Label: r.Label, Config: map[string]any{}, Links: []DNSProviderLink{},
		VerifiedAt: r.VerifiedAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	_ = json.Unmarshal(r.Config, &out.Config)
	links, err := dnsfix.ConnectionLinks(ctx, s.db, r.ID)
	if err != nil {
		return out, err
	}
	for _, l := range links {
		out.Links = append(out.Links, DNSProviderLink{Domain: l.DomainName, Zone: l.ZoneName, ZoneID: l.ZoneID, LinkedAt: l.CreatedAt.UTC()})
	}
	return out, nil
}

func (s *Server) dnsProviderRoutes() {
	const base = "/api/accounts/me/dns-providers"
	const tag = "DNS connections"
	s.ops.CreateDNSProvider = Handle(s.router, Endpoint[CreateDNSProviderRequest, DNSProvider]{
		Method: "POST", Path: base, Status: 201, OperationID: "createDNSProvider", Tag: tag, Errors: []int{409},
		Summary: "Connect a DNS provider",
		Description: "Checks the configuration, then verifies the credentials with the provider by a read (rfc2136: a TSIG-signed " +
			"query the server must verify; cloudflare: the token verification endpoint; route53: a hosted-zone read). A refusal is " +
			"422 naming what failed (e.g. a TSIG key the server refuses: BADKEY/BADSIG). Credentials are stored encrypted and never shown again. " +
			"A duplicate label is 409, and so is a connection beyond the cap of " + strconv.Itoa(dnsfix.MaxConnectionsPerAccount) + " per account.",
		Call: s.createDNSProvider,
	})
	s.ops.ListDNSProviders = Handle(s.router, Endpoint[emptyRequest, []DNSProvider]{
		Method: "GET", Path: base, OperationID: "listDNSProviders", Tag: tag,
		Summary: "List DNS connections",
		Call:    s.listDNSProviders,
	})
	Handle(s.router, Endpoint[DNSProviderPath, DNSProvider]{
		Method: "GET", Path: base + "/{id}", OperationID: "getDNSProvider", Tag: tag, Errors: []int{404},
		Summary: "One DNS connection with its linked domains",
		Call:    s.getDNSProvider,
	})
	Handle(s.router, Endpoint[UpdateDNSProviderRequest, DNSProvider]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateDNSProvider", Tag: tag, Errors: []int{404, 409},
		Summary:     "Rename a DNS connection or replace its credentials",
		Description: "A new config (of the same kind) is verified with the provider like at creation.",
		Call:        s.updateDNSProvider,
	})
	s.ops.DeleteDNSProvider = Handle(s.router, Endpoint[DNSProviderPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteDNSProvider", Tag: tag, Errors: []int{404},
		Summary: "Delete a DNS connection", Description: "Its domains are unlinked; recommendations can no longer be applied to them.",
		Call: s.deleteDNSProvider,
	})
	s.ops.LinkDNSProvider = Handle(s.router, Endpoint[DNSProviderLinkRequest, DNSProviderLink]{
		Method: "POST", Path: base + "/{id}/links", Status: 201, OperationID: "linkDNSProvider", Tag: tag, Errors: []int{404},
		Summary: "Write a domain's DNS fixes through this connection",
		Description: "Finds the zone that holds the domain at the provider (rfc2136: the nearest SOA the server is authoritative " +
			"for, then an update with only a prerequisite, which changes nothing, to check the key may write it). No zone: 422. " +
			"A domain has at most one connection; linking it again moves it.",
		Call: s.linkDNSProvider,
	})
	s.ops.UnlinkDNSProvider = Handle(s.router, Endpoint[DNSProviderLinkRequest, NoContent]{
		Method: "DELETE", Path: base + "/{id}/links", Status: 204, OperationID: "unlinkDNSProvider", Tag: tag, Errors: []int{404},
		Summary: "Stop writing a domain's DNS through this connection",
		Call:    s.unlinkDNSProvider,
	})
}

// listDNSProviders serves GET /api/accounts/me/dns-providers: list DNS connections.
func (s *Server) listDNSProviders(ctx context.Context, _ *emptyRequest) (*[]DNSProvider, error) {
	rows, err := dnsfix.ListConnections(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	out := make([]DNSProvider, 0, len(rows))
	for _, r := range rows {
		p, err := s.dnsProviderFromRow(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return &out, nil
}

// getDNSProvider serves GET /api/accounts/me/dns-providers/{id}: one DNS connection with its linked domains.
func (s *Server) getDNSProvider(ctx context.Context, req *DNSProviderPath) (*DNSProvider, error) {
	row, err := dnsfix.GetConnection(ctx, s.db, mustCaller(ctx).AccountID, req.ID)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("DNS connection")
	}
	if err != nil {
		return nil, err
	}
	out, err := s.dnsProviderFromRow(ctx, row)
	return &out, err
}

// deleteDNSProvider serves DELETE /api/accounts/me/dns-providers/{id}: delete a DNS connection.
func (s *Server) deleteDNSProvider(ctx context.Context, req *DNSProviderPath) (*NoContent, error) {
	err := dnsfix.DeleteConnection(ctx, s.db, mustCaller(ctx).AccountID, req.ID)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("DNS connection")
	}
	if err != nil {
		return nil, err
	}
	return &NoContent{}, nil
}

// linkDNSProvider serves POST /api/accounts/me/dns-providers/{id}/links: write a domain's DNS fixes through this connection.
func (s *Server) linkDNSProvider(ctx context.Context, req *DNSProviderLinkRequest) (*DNSProviderLink, error) {
	env, err := s.dnsFixEnv()
	if err != nil {
		return nil, err
	}
	l, name, err := dnsfix.Link(ctx, s.db, env, mustCaller(ctx).AccountID, req.ID, req.Domain)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("DNS connection")
	}
	if err != nil {
		return nil, dnsFixError(err)
	}
	return &DNSProviderLink{Domain: name, Zone: l.ZoneName, ZoneID: l.ZoneID, LinkedAt: l.CreatedAt.UTC()}, nil
}

// unlinkDNSProvider serves DELETE /api/accounts/me/dns-providers/{id}/links: stop writing a domain's DNS through this connection.
func (s *Server) unlinkDNSProvider(ctx context.Context, req *DNSProviderLinkRequest) (*NoContent, error) {
	err := dnsfix.Unlink(ctx, s.db, mustCaller(ctx).AccountID, req.ID, req.Domain)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("link")
	}
	if err != nil {
		return nil, dnsFixError(err)
	}
	return &NoContent{}, nil
}

// createDNSProvider serves POST /api/accounts/me/dns-providers: connect a DNS provider.
func (s *Server) createDNSProvider(ctx context.Context, req *CreateDNSProviderRequest) (*DNSProvider, error) {
	env, err := s.dnsFixEnv()
	if err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(req.Config)
	row, err := dnsfix.CreateConnection(ctx, s.db, env, mustCaller(ctx).AccountID, dnsfix.ConnectionInput{Kind: req.Kind, Label: req.Label, Config: cfg}, s.now())
	if err != nil {
		return nil, dnsFixError(err)
	}
	out, err := s.dnsProviderFromRow(ctx, row)
	return &out, err
}

// updateDNSProvider serves PATCH /api/accounts/me/dns-providers/{id}: rename a DNS connection or replace its credentials.
func (s *Server) updateDNSProvider(ctx context.Context, req *UpdateDNSProviderRequest) (*DNSProvider, error) {
	env, err := s.dnsFixEnv()
	if err != nil {
		return nil, err
	}
	var cfg json.RawMessage
	if req.Config != nil {
		cfg, _ = json.Marshal(req.Config)
	}
	row, err := dnsfix.UpdateConnection(ctx, s.db, env, mustCaller(ctx).AccountID, req.ID, req.Label, cfg, s.now())
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil, NotFound("DNS connection")
	}
	if err != nil {
		return nil, dnsFixError(err)
	}
	out, err := s.dnsProviderFromRow(ctx, row)
	return &out, err
}

// PrepareJSONSchema implements jsonschema.Preparer: config depends on kind,
// so the document shows a whole body.
func (CreateDNSProviderRequest) PrepareJSONSchema(s *jsonschema.Schema) error {
	s.WithExamples(map[string]any{"kind": "cloudflare", "label": "cloudflare",
		"config": map[string]any{"api_token": "cf-token-with-zone-read-and-dns-edit"}})
	return nil
}
