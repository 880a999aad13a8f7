package web

// The DNS connections page: connect a DNS provider (the credentials are
// checked against it, stored encrypted and never shown), bind monitored
// domains to it so that a recommendation's Apply button can write the
// record, and delete it.

import (
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
)

type dnsConnectionsData struct {
	Connections []api.DNSProvider
	Domains     []string
	Kinds       []string
	Algorithms  []string
	// Form keeps what a refused create posted, except the secrets.
	Form createForm
	// Created is the connection the form just made.
	Created *api.DNSProvider
}

var (
	dnsConnectionKinds = []string{"rfc2136", "cloudflare", "route53"}
	tsigAlgorithms     = []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}
)

func (h *Dashboard) dnsConnectionsPage(c *fiber.Ctx, status int, d dnsConnectionsData, problem string) error {
	list, err := h.ops.ListDNSProviders.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	d.Connections = *list
	doms, err := h.ops.ListDomains.Call(c.UserContext(), callerOf(c), &api.ListDomainsRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	for _, dom := range *doms {
		d.Domains = append(d.Domains, dom.Domain)
	}
	d.Kinds, d.Algorithms = dnsConnectionKinds, tsigAlgorithms
	return h.render(c, status, "dnsconnections", "DNS connections", d, problem)
}

func (h *Dashboard) webDNSConnections(c *fiber.Ctx) error {
	return h.dnsConnectionsPage(c, http.StatusOK, dnsConnectionsData{}, "")
}

func (h *Dashboard) webCreateDNSConnection(c *fiber.Ctx) error {
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
	req := &api.CreateDNSProviderRequest{Kind: kind, Label: c.FormValue("label"), Config: cfg}
	p, err := h.ops.CreateDNSProvider.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		status, msg := h.problemText(c, err)
		return h.dnsConnectionsPage(c, status, dnsConnectionsData{Form: createForm{Kind: kind, Label: req.Label}}, msg)
	}
	return h.dnsConnectionsPage(c, http.StatusCreated, dnsConnectionsData{Created: p}, "")
}

func (h *Dashboard) webDeleteDNSConnection(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/dns-connections", api.NotFound("DNS connection"), "")
	}
	_, err = h.ops.DeleteDNSProvider.Call(c.UserContext(), callerOf(c), &api.DNSProviderPath{ID: id})
	return h.done(c, "/dns-connections", err, "DNS connection deleted")
}

// webLinkDNSConnection binds (or, at .../links/remove, unbinds) the form's
// domain.
func (h *Dashboard) webLinkDNSConnection(link bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return h.done(c, "/dns-connections", api.NotFound("DNS connection"), "")
		}
		req := &api.DNSProviderLinkRequest{ID: id, Domain: c.FormValue("domain")}
		to := "/dns-connections#c-" + id.String()
		if !link {
			_, err = h.ops.UnlinkDNSProvider.Call(c.UserContext(), callerOf(c), req)
			return h.done(c, to, err, "unlinked "+req.Domain)
		}
		l, err := h.ops.LinkDNSProvider.Call(c.UserContext(), callerOf(c), req)
		if err != nil {
			return h.done(c, to, err, "")
		}
		return h.done(c, to, nil, "linked "+l.Domain+" (zone "+l.Zone+")")
	}
}
