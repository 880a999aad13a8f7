package web

// The sending providers page: connect a provider (its verification
// material goes in, never comes back out), bind sending domains, see the
// last day's outcomes, and check or edit the suppression list.

import (
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
)

type providersData struct {
	Providers []api.SendingProvider
	// Created is the provider the form just made: its ingress URL and
	// setup steps lead the page.
	Created *api.SendingProvider
	// Form keeps what a refused create posted, except the secrets.
	Form    createForm
	Kinds   []string
	Domains []string
	// Last24h counts the account's message events of the last day.
	Last24h *api.MessageTypeBreakdown
	// Check answers the suppression check form.
	Check      *api.SuppressionCheck
	CheckEmail string
}

// createForm is what a refused create form is shown again with: the
// kind and label, never the secrets.
type createForm struct {
	Kind, Label string
}

// providerKinds are the kinds the create form offers, as the API names them.
var providerKinds = []string{"ses", "sendgrid", "postmark", "mailgun", "resend"}

func (h *Dashboard) providersPage(c *fiber.Ctx, status int, d providersData, problem string) error {
	list, err := h.ops.ListSendingProviders.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	d.Providers = *list
	doms, err := h.ops.ListDomains.Call(c.UserContext(), callerOf(c), &api.ListDomainsRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	for _, dom := range *doms {
		d.Domains = append(d.Domains, dom.Domain)
	}
	since := h.deps.Now().Add(-24 * time.Hour)
	if d.Last24h, err = h.ops.MessageTypeBreakdown.Call(c.UserContext(), callerOf(c), &api.MessageTypeBreakdownRequest{Since: &since}); err != nil {
		return h.pageError(c, err)
	}
	d.Kinds = providerKinds
	return h.render(c, status, "providers", "Sending providers", d, problem)
}

// webProviders is the page; ?check=<email> also answers the suppression
// check (a read, so a GET form).
func (h *Dashboard) webProviders(c *fiber.Ctx) error {
	d := providersData{}
	if email := strings.TrimSpace(c.Query("check")); email != "" {
		d.CheckEmail = email
		res, err := h.ops.CheckSuppression.Call(c.UserContext(), callerOf(c), &api.SuppressionEmailQuery{Email: email})
		if err != nil {
			status, msg := h.problemText(c, err)
			return h.providersPage(c, status, d, msg)
		}
		d.Check = res
	}
	return h.providersPage(c, http.StatusOK, d, "")
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

func (h *Dashboard) webCreateProvider(c *fiber.Ctx) error {
	// The form shows every kind's fields; only the chosen kind's are sent,
	// so a value typed under another kind is not an error.
	cfg := &api.ProviderConfig{}
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
	req := &api.CreateProviderRequest{Kind: c.FormValue("kind"), Label: c.FormValue("label"), Config: cfg}
	p, err := h.ops.CreateSendingProvider.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		status, msg := h.problemText(c, err)
		// The secrets are not echoed into the page: they are typed again.
		return h.providersPage(c, status, providersData{Form: createForm{Kind: req.Kind, Label: req.Label}}, msg)
	}
	return h.providersPage(c, http.StatusCreated, providersData{Created: p}, "")
}

func (h *Dashboard) webDeleteProvider(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/providers", api.NotFound("sending provider"), "")
	}
	_, err = h.ops.DeleteSendingProvider.Call(c.UserContext(), callerOf(c), &api.ProviderPath{ID: id})
	return h.done(c, "/providers", err, "sending provider deleted")
}

// webLinkProvider binds (or, at .../links/remove, unbinds) the form's
// domain.
func (h *Dashboard) webLinkProvider(link bool) fiber.Handler {
	op, notice := h.ops.LinkSendingProvider, "linked "
	if !link {
		op, notice = h.ops.UnlinkSendingProvider, "unlinked "
	}
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return h.done(c, "/providers", api.NotFound("sending provider"), "")
		}
		domain := c.FormValue("domain")
		_, err = op.Call(c.UserContext(), callerOf(c), &api.ProviderLinkRequest{ID: id, Domain: domain})
		return h.done(c, "/providers#p-"+id.String(), err, notice+domain)
	}
}

func (h *Dashboard) webAddSuppression(c *fiber.Ctx) error {
	email := c.FormValue("email")
	_, err := h.ops.AddSuppression.Call(c.UserContext(), callerOf(c), &api.AddSuppressionRequest{Email: email, Domain: optional(c.FormValue("domain"))})
	return h.done(c, "/providers#suppressions", err, email+" suppressed")
}

func (h *Dashboard) webRemoveSuppression(c *fiber.Ctx) error {
	email := c.FormValue("email")
	_, err := h.ops.RemoveSuppression.Call(c.UserContext(), callerOf(c), &api.SuppressionEmailQuery{Email: email})
	return h.done(c, "/providers#suppressions", err, email+" removed from the suppression list")
}
