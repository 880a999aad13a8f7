package api

// The dashboard's sending providers page: connect a provider (its
// verification material goes in, never comes back out), bind sending
// domains, see the last day's outcomes, and check or edit the suppression
// list. Like every page it calls the REST endpoints' functions.

import (
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

type providersData struct {
	Providers []SendingProvider
	// Created is the provider the form just made: its ingress URL and
	// setup steps lead the page.
	Created *SendingProvider
	// Form keeps what a refused create posted, except the secrets.
	Form    createForm
	Kinds   []string
	Domains []string
	// Last24h counts the account's message events of the last day.
	Last24h *MessageTypeBreakdown
	// Check answers the suppression check form.
	Check      *SuppressionCheck
	CheckEmail string
}

// createForm is what a refused create form is shown again with: the
// kind and label, never the secrets.
type createForm struct {
	Kind, Label string
}

// providerKinds are the kinds the create form offers, as the API names them.
var providerKinds = []string{"ses", "sendgrid", "postmark", "mailgun", "resend"}

func (s *Server) providersPage(c *fiber.Ctx, status int, d providersData, problem string) error {
	list, err := call[emptyRequest, []SendingProvider](c, s, "listSendingProviders", &emptyRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	d.Providers = *list
	doms, err := call[ListDomainsRequest, []Domain](c, s, "listDomains", &ListDomainsRequest{})
	if err != nil {
		return s.pageError(c, err)
	}
	for _, dom := range *doms {
		d.Domains = append(d.Domains, dom.Domain)
	}
	since := s.now().Add(-24 * time.Hour)
	if d.Last24h, err = call[MessageTypeBreakdownRequest, MessageTypeBreakdown](c, s, "messageTypeBreakdown", &MessageTypeBreakdownRequest{Since: &since}); err != nil {
		return s.pageError(c, err)
	}
	d.Kinds = providerKinds
	return s.render(c, status, "providers", "Sending providers", d, problem)
}

// webProviders is the page; ?check=<email> also answers the suppression
// check (a read, so a GET form).
func (s *Server) webProviders(c *fiber.Ctx) error {
	d := providersData{}
	if email := strings.TrimSpace(c.Query("check")); email != "" {
		d.CheckEmail = email
		res, err := call[SuppressionEmailQuery, SuppressionCheck](c, s, "checkSuppression", &SuppressionEmailQuery{Email: email})
		if err != nil {
			status, msg := s.problemText(c, err)
			return s.providersPage(c, status, d, msg)
		}
		d.Check = res
	}
	return s.providersPage(c, http.StatusOK, d, "")
}

// formList splits a textarea's lines and commas into values.
func formList(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (s *Server) webCreateProvider(c *fiber.Ctx) error {
	// The form shows every kind's fields; only the chosen kind's are sent,
	// so a value typed under another kind is not an error.
	cfg := &ProviderConfig{}
	switch kind := c.FormValue("kind"); kind {
	case "ses":
		cfg.TopicARNs = formList(c.FormValue("topic_arns"))
	case "sendgrid":
		cfg.PublicKey = c.FormValue("public_key")
	case "postmark":
		cfg.BasicAuthUser, cfg.BasicAuthPassword = c.FormValue("basic_auth_user"), c.FormValue("basic_auth_password")
		cfg.AllowedIPs = formList(c.FormValue("allowed_ips"))
	case "mailgun":
		cfg.SigningKey = c.FormValue("signing_key")
	case "resend":
		cfg.SigningSecret = c.FormValue("signing_secret")
	}
	req := &CreateProviderRequest{Kind: c.FormValue("kind"), Label: c.FormValue("label"), Config: cfg}
	p, err := call[CreateProviderRequest, SendingProvider](c, s, "createSendingProvider", req)
	if err != nil {
		status, msg := s.problemText(c, err)
		// The secrets are not echoed into the page: they are typed again.
		return s.providersPage(c, status, providersData{Form: createForm{Kind: req.Kind, Label: req.Label}}, msg)
	}
	return s.providersPage(c, http.StatusCreated, providersData{Created: p}, "")
}

func (s *Server) webDeleteProvider(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.done(c, "/providers", NotFound("sending provider"), "")
	}
	_, err = call[ProviderPath, NoContent](c, s, "deleteSendingProvider", &ProviderPath{ID: id})
	return s.done(c, "/providers", err, "sending provider deleted")
}

// webLinkProvider binds (or, at .../links/remove, unbinds) the form's
// domain.
func (s *Server) webLinkProvider(link bool) fiber.Handler {
	op, notice := "linkSendingProvider", "linked "
	if !link {
		op, notice = "unlinkSendingProvider", "unlinked "
	}
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.done(c, "/providers", NotFound("sending provider"), "")
		}
		domain := c.FormValue("domain")
		_, err = call[ProviderLinkRequest, SendingProvider](c, s, op, &ProviderLinkRequest{ID: id, Domain: domain})
		return s.done(c, "/providers#p-"+id.String(), err, notice+domain)
	}
}

func (s *Server) webAddSuppression(c *fiber.Ctx) error {
	email := c.FormValue("email")
	_, err := call[AddSuppressionRequest, SuppressionEntry](c, s, "addSuppression", &AddSuppressionRequest{Email: email, Domain: optional(c.FormValue("domain"))})
	return s.done(c, "/providers#suppressions", err, email+" suppressed")
}

func (s *Server) webRemoveSuppression(c *fiber.Ctx) error {
	email := c.FormValue("email")
	_, err := call[SuppressionEmailQuery, NoContent](c, s, "removeSuppression", &SuppressionEmailQuery{Email: email})
	return s.done(c, "/providers#suppressions", err, email+" removed from the suppression list")
}
