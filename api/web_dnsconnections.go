package api

// The dashboard's DNS connections page: connect a DNS provider (the
// credentials are checked against it, stored encrypted and never shown),
// bind monitored domains to it so that a recommendation's Apply button can
// write the record, and delete it. Like every page it calls the REST
// endpoints' functions.

import (
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

type dnsConnectionsData struct {
	Connections []DNSProvider
	Domains     []string
	Kinds       []string
	Algorithms  []string
	// Form keeps what a refused create posted, except the secrets.
	Form createForm
	// Created is the connection the form just made.
	Created *DNSProvider
}

var (
	dnsConnectionKinds = []string{"rfc2136", "cloudflare", "route53"}
	tsigAlgorithms     = []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}
)

func (s *Server) dnsConnectionsPage(c *fiber.Ctx, status int, d dnsConnectionsData, problem string) error {
	list, err := call[emptyRequest, []DNSProvider](c, s, "listDNSProviders", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	d.Connections = *list
	doms, err := call[ListDomainsRequest, []Domain](c, s, "listDomains", &ListDomainsRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	for _, dom := range *doms {
		d.Domains = append(d.Domains, dom.Domain)
	}
	d.Kinds, d.Algorithms = dnsConnectionKinds, tsigAlgorithms
	return s.render(c, status, "dnsconnections", "DNS connections", d, problem)
}

func (s *Server) webDNSConnections(c *fiber.Ctx) error {
	return s.dnsConnectionsPage(c, http.StatusOK, dnsConnectionsData{}, "")
}

func (s *Server) webCreateDNSConnection(c *fiber.Ctx) error {
	// Every kind's fields are on the form; only the chosen kind's are sent,
	// and an optional one left empty is left out.
	cfg := map[string]any{}
	set := func(name string) {
		if v := strings.TrimSpace(c.FormValue(name)); v != "" {
			cfg[name] = v
		}
	}
	kind := c.FormValue("kind")
	switch kind {
	case "rfc2136":
		set("server")
		set("tsig_key_name")
		set("tsig_algorithm")
		set("tsig_secret")
	case "cloudflare":
		set("api_token")
	case "route53":
		set("access_key_id")
		set("secret_access_key")
		set("hosted_zone_id")
	}
	req := &CreateDNSProviderRequest{Kind: kind, Label: c.FormValue("label"), Config: cfg}
	p, err := call[CreateDNSProviderRequest, DNSProvider](c, s, "createDNSProvider", req)
	if err != nil {
		status, msg := s.problemText(c, err)
		return s.dnsConnectionsPage(c, status, dnsConnectionsData{Form: createForm{Kind: kind, Label: req.Label}}, msg)
	}
	return s.dnsConnectionsPage(c, http.StatusCreated, dnsConnectionsData{Created: p}, "")
}

func (s *Server) webDeleteDNSConnection(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/dns-connections", NotFound("DNS connection"), "")
	}
	_, err = call[DNSProviderPath, NoContent](c, s, "deleteDNSProvider", &DNSProviderPath{ID: id})
	return s.done(c, "/dns-connections", err, "DNS connection deleted")
}

// webLinkDNSConnection binds (or, at .../links/remove, unbinds) the form's
// domain.
func (s *Server) webLinkDNSConnection(link bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.done(c, "/dns-connections", NotFound("DNS connection"), "")
		}
		req := &DNSProviderLinkRequest{ID: id, Domain: c.FormValue("domain")}
		to := "/dns-connections#c-" + id.String()
		if !link {
			_, err = call[DNSProviderLinkRequest, NoContent](c, s, "unlinkDNSProvider", req)
			return s.done(c, to, err, "unlinked "+req.Domain)
		}
		l, err := call[DNSProviderLinkRequest, DNSProviderLink](c, s, "linkDNSProvider", req)
		if err != nil {
			return s.done(c, to, err, "")
		}
		return s.done(c, to, nil, "linked "+l.Domain+" (zone "+l.Zone+")")
	}
}
