package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// ProviderConfig is a sending provider's verification material. Which
// fields apply depends on kind; every value is encrypted at rest and never
// shown again.
type ProviderConfig struct {
	TopicARNs         []string `json:"topic_arns,omitempty" validate:"omitempty,max=20,dive,sns_topic_arn" description:"ses: the SNS topic ARNs allowed to post (1 to 20)."`
	PublicKey         string   `json:"public_key,omitempty" description:"sendgrid: the Signed Event Webhook verification key (base64 DER ECDSA P-256), as SendGrid shows it."`
	BasicAuthUser     string   `json:"basic_auth_user,omitempty" description:"postmark: the basic-auth user name of the webhook URL."`
	BasicAuthPassword string   `json:"basic_auth_password,omitempty" description:"postmark: the basic-auth password (at least 12 characters)."`
	AllowedIPs        []string `json:"allowed_ips,omitempty" description:"postmark, optional: IP addresses or CIDRs requests must come from (Postmark's published webhook IPs)."`
	SigningKey        string   `json:"signing_key,omitempty" description:"mailgun: the HTTP webhook signing key."`
	SigningSecret     string   `json:"signing_secret,omitempty" description:"resend: the endpoint's signing secret (whsec_...)."`
}

func (c ProviderConfig) toCapability() providers.Config {
	return providers.Config{
		TopicARNs: c.TopicARNs, PublicKey: strings.TrimSpace(c.PublicKey), BasicAuthUser: c.BasicAuthUser,
		BasicAuthPassword: c.BasicAuthPassword, AllowedIPs: c.AllowedIPs, SigningKey: c.SigningKey, SigningSecret: c.SigningSecret,
	}
}

// SendingProvider is a provider configuration as the API shows it.
type SendingProvider struct {
	ID               uuid.UUID  `json:"id" validate:"required"`
	Kind             string     `json:"kind" validate:"required" enum:"ses,sendgrid,postmark,mailgun,resend"`
	Label            string     `json:"label" validate:"required"`
	ConfiguredFields []string   `json:"configured_fields" validate:"required" description:"Names of the config fields stored (values are never shown)."`
	IngressURL       string     `json:"ingress_url" validate:"required" description:"Where the provider must post its webhooks (PUBLIC_BASE_URL + /api/webhooks/providers/{id})."`
	SetupSteps       []string   `json:"setup_steps" validate:"required" description:"What to configure at the provider."`
	LinkedDomains    []string   `json:"linked_domains" validate:"required" description:"Sending domains bound to this provider; events for other sender domains are stored but flagged unlinked and not counted in rates."`
	LastPayloadAt    *time.Time `json:"last_payload_at" validate:"required" description:"Last verified webhook (updated at most once a minute); null before the first."`
	CreatedAt        time.Time  `json:"created_at" validate:"required"`
	UpdatedAt        time.Time  `json:"updated_at" validate:"required"`
}

// CreateProviderRequest is the body of POST .../sending-providers.
type CreateProviderRequest struct {
	Kind   string          `json:"kind" validate:"required,oneof=ses sendgrid postmark mailgun resend"`
	Label  string          `json:"label" validate:"required,min=1,max=100,not_blank"`
	Config *ProviderConfig `json:"config" validate:"required"`
}

// UpdateProviderRequest is the body of PATCH .../sending-providers/{id}.
type UpdateProviderRequest struct {
	_      atLeastOne
	ID     uuid.UUID       `path:"id" format:"uuid"`
	Label  *string         `json:"label,omitempty" validate:"omitempty,min=1,max=100,not_blank"`
	Config *ProviderConfig `json:"config,omitempty" description:"Replaces the whole verification material (give every field the kind needs)."`
}

// ProviderPath names one provider.
type ProviderPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// ProviderLinkRequest is the body of POST and DELETE .../links.
type ProviderLinkRequest struct {
	ID     uuid.UUID `path:"id" format:"uuid"`
	Domain string    `json:"domain" validate:"required,max=253,domain_name" example:"example.com" description:"A registered domain of the account."`
}

// ForceRequestBody documents the body of the DELETE route too: it names the
// domain to unbind.
func (ProviderLinkRequest) ForceRequestBody() {}

// ProviderIngressRequest documents POST /api/webhooks/providers/{id}: the
// body is the provider's raw webhook.
type ProviderIngressRequest struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// ProviderIngressResult is what the ingress stored.
type ProviderIngressResult struct {
	PayloadID *string `json:"payload_id" validate:"required" description:"The stored payload; null for a verified message that needs no work (SNS UnsubscribeConfirmation)."`
	Duplicate bool    `json:"duplicate" validate:"required" description:"True when this exact request was stored before: acknowledged and ignored."`
}

// providerIngestJob is a stored payload's own job: an SNS subscription confirmation is confirmed at once, the rest wait for their batch.
func providerIngestJob(in providers.Ingest, st providers.Stored) river.JobArgs {
	if in.Verified.Confirmation {
		return providers.SNSConfirmArgs{PayloadID: st.PayloadID}
	}
	return nil // normalised with the rest of its batch (BatchJob)
}

func (s *Server) providerRoutes() {
	s.providerCache = &providers.Cache{Keyring: s.deps.Keyring}
	if s.deps.SNSCerts == nil {
		// As cmd/mailwatch wires it: the SSRF-guarded client, AWS hosts only.
		s.deps.SNSCerts = &ses.HTTPCertFetcher{Client: ses.AWSOnlyClient(webhook.NewClient(s.deps.WebhookGuard, webhook.ClientOptions{}))}
	}
	s.ingester = &providers.Ingester{
		DB: s.db, River: s.deps.River,
		JobFor: providerIngestJob,
		BatchJob: func(account uuid.UUID, ids []uuid.UUID) river.JobArgs {
			return providers.PayloadArgs{AccountID: account, PayloadIDs: ids}
		},
	}
	if _, ok := s.db.(pgx.Tx); ok {
		s.ingester.Flushers = 1 // tests: one transaction, one user at a time
	}
	const base = "/api/accounts/me/sending-providers"
	const tag = "sending providers"
	s.ops.CreateSendingProvider = Handle(s.router, Endpoint[CreateProviderRequest, SendingProvider]{
		Method: "POST", Path: base, Status: 201, OperationID: "createSendingProvider", Tag: tag, Errors: []int{402, 409},
		Summary: "Connect a sending provider's webhooks",
		Description: "kind is ses, sendgrid, postmark, mailgun or resend; config holds that kind's verification material " +
			"(ses {topic_arns}, sendgrid {public_key}, postmark {basic_auth_user, basic_auth_password, allowed_ips?}, " +
			"mailgun {signing_key}, resend {signing_secret}), encrypted at rest and never shown again. The answer gives the " +
			"ingress URL and the setup steps. A duplicate label is 409.",
		Call: s.createProvider,
	})
	s.ops.ListSendingProviders = Handle(s.router, Endpoint[emptyRequest, []SendingProvider]{
		Method: "GET", Path: base, OperationID: "listSendingProviders", Tag: tag,
		Summary: "List the account's sending providers",
		Call:    s.listSendingProviders,
	})
	Handle(s.router, Endpoint[ProviderPath, SendingProvider]{
		Method: "GET", Path: base + "/{id}", OperationID: "getSendingProvider", Tag: tag, Errors: []int{404},
		Summary: "One sending provider",
		Call: func(ctx context.Context, req *ProviderPath) (*SendingProvider, error) {
			return s.getProvider(ctx, s.db, req.ID)
		},
	})
	Handle(s.router, Endpoint[UpdateProviderRequest, SendingProvider]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateSendingProvider", Tag: tag, Errors: []int{404, 409},
		Summary:     "Rename a provider or replace its verification material",
		Description: "label is trimmed and must keep 1 to 100 characters, as on create (422).",
		Call:        s.updateProvider,
	})
	s.ops.DeleteSendingProvider = Handle(s.router, Endpoint[ProviderPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteSendingProvider", Tag: tag, Errors: []int{404},
		Summary:     "Delete a sending provider",
		Description: "Deletes the provider, its links, stored payloads and message events; its ingress URL answers 404 from then on. Suppression entries stay.",
		Call:        s.deleteSendingProvider,
	})
	s.ops.LinkSendingProvider = Handle(s.router, Endpoint[ProviderLinkRequest, SendingProvider]{
		Method: "POST", Path: base + "/{id}/links", OperationID: "linkSendingProvider", Tag: tag, Errors: []int{404},
		Summary:     "Bind a sending domain to the provider",
		Description: "domain must be a registered domain of the account (else 422). Linking twice is harmless.",
		Call: func(ctx context.Context, req *ProviderLinkRequest) (*SendingProvider, error) {
			return s.linkProvider(ctx, req, true)
		},
	})
	s.ops.UnlinkSendingProvider = Handle(s.router, Endpoint[ProviderLinkRequest, SendingProvider]{
		Method: "DELETE", Path: base + "/{id}/links", OperationID: "unlinkSendingProvider", Tag: tag, Errors: []int{404},
		Summary:     "Unbind a sending domain from the provider",
		Description: "The body names the domain; 404 when it was not linked. Events already stored keep their domain.",
		Call: func(ctx context.Context, req *ProviderLinkRequest) (*SendingProvider, error) {
			return s.linkProvider(ctx, req, false)
		},
	})
	HandleRaw(s.router, Endpoint[ProviderIngressRequest, ProviderIngressResult]{
		Method: "POST", Path: "/api/webhooks/providers/{id}", OperationID: "ingestProviderWebhook", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "A sending provider's event webhook",
		Description: "The body is the provider's raw webhook, verified on the exact bytes as the provider specifies: SendGrid " +
			"ECDSA P-256 (X-Twilio-Email-Event-Webhook-Signature/-Timestamp), Mailgun HMAC-SHA256 of timestamp+token (a token " +
			"is single-use), Resend's svix-id/svix-timestamp/svix-signature, Postmark basic auth (+ optional IP allow-list), " +
			"SES through SNS (signature versions 1 and 2, certificate from sns.<region>.amazonaws.com only, TopicArn in the " +
			"allow-list). Timestamps are checked against PROVIDER_WEBHOOK_MAX_AGE when it is set. The verified payload is " +
			"stored as received and normalised by a job (a NUL character or invalid UTF-8 in an event's strings becomes U+FFFD); " +
			"a repeat of the same request is acknowledged (duplicate: true) and ignored. 401 bad signature, or a replay key " +
			"(Mailgun token, svix-id, SNS MessageId) reused with another body; 400 unreadable payload, 404 unknown provider, 503 " +
			"when the SNS certificate cannot be fetched (SNS retries).",
		Errors: []int{401, 404, 413, 503},
		// SNS posts its JSON as text/plain.
		BodyTypes: []string{"application/json", "text/plain"},
	}, s.ingestProvider)
}

// listSendingProviders serves GET /api/accounts/me/sending-providers: list the account's sending providers.
func (s *Server) listSendingProviders(ctx context.Context, _ *emptyRequest) (*[]SendingProvider, error) {
	rows, err := s.q.ProviderListByAccount(ctx, s.db, dbsqlc.ProviderListByAccountParams{AccountID: mustCaller(ctx).AccountID, Max: providers.MaxPerAccount})
	if err != nil {
		return nil, err
	}
	return s.renderProviders(ctx, s.db, rows)
}

// deleteSendingProvider serves DELETE /api/accounts/me/sending-providers/{id}: delete a sending provider.
func (s *Server) deleteSendingProvider(ctx context.Context, req *ProviderPath) (*NoContent, error) {
	n, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		n, err := s.q.ProviderDelete(ctx, tx, dbsqlc.ProviderDeleteParams{ID: req.ID, AccountID: mustCaller(ctx).AccountID})
		if err != nil || n == 0 {
			return n, err
		}
		// Payloads have no foreign key to cascade (0017).
		return n, s.q.ProviderPayloadDeleteByProvider(ctx, tx, dbsqlc.ProviderPayloadDeleteByProviderParams{AccountID: mustCaller(ctx).AccountID, ProviderID: req.ID})
	})
	if err != nil {
		return nil, err
	}
	s.providerCache.Forget(req.ID)
	if n == 0 {
		return nil, NotFound("sending provider")
	}
	return &NoContent{}, nil
}

func providerFromRow(r *dbsqlc.SendingProvider, publicBaseURL string, domains []string) SendingProvider {
	url := providers.IngressURL(publicBaseURL, r.ID)
	if domains == nil {
		domains = []string{}
	}
	return SendingProvider{
		ID: r.ID, Kind: r.Kind, Label: r.Label, ConfiguredFields: providers.ConfiguredFields(r), IngressURL: url,
		SetupSteps: providers.SetupSteps(r.Kind, url), LinkedDomains: domains, LastPayloadAt: whUTC(r.LastPayloadAt),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

func (s *Server) publicBase() string {
	if s.deps.PublicBaseURL != "" {
		return s.deps.PublicBaseURL
	}
	return "http://localhost:8080"
}

func (s *Server) renderProviders(ctx context.Context, db dbutil.Executor, rows []dbsqlc.SendingProvider) (*[]SendingProvider, error) {
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	links, err := s.q.ProviderLinkListByProviders(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	byProvider := map[uuid.UUID][]string{}
	for _, l := range links {
		byProvider[l.ProviderID] = append(byProvider[l.ProviderID], l.Name)
	}
	out := make([]SendingProvider, len(rows))
	for i := range rows {
		out[i] = providerFromRow(&rows[i], s.publicBase(), byProvider[rows[i].ID])
	}
	return &out, nil
}

func (s *Server) getProvider(ctx context.Context, db dbutil.Executor, id uuid.UUID) (*SendingProvider, error) {
	row, err := s.q.ProviderGetByID(ctx, db, dbsqlc.ProviderGetByIDParams{ID: id, AccountID: mustCaller(ctx).AccountID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("sending provider")
	}
	if err != nil {
		return nil, err
	}
	list, err := s.renderProviders(ctx, db, []dbsqlc.SendingProvider{row})
	if err != nil {
		return nil, err
	}
	return &(*list)[0], nil
}

func providerConfigError(err error) error {
	var fe *providers.FieldError
	if errors.As(err, &fe) {
		return InvalidField(fe.Field, fe.Message)
	}
	return err
}

func (s *Server) createProvider(ctx context.Context, req *CreateProviderRequest) (*SendingProvider, error) {
	caller := mustCaller(ctx)
	label, err := providers.NormalizeLabel(req.Label)
	if err != nil {
		return nil, providerConfigError(err)
	}
	cfg := req.Config.toCapability()
	if _, err := providers.Validate(req.Kind, cfg); err != nil {
		return nil, providerConfigError(err)
	}
	id := uuid.Must(uuid.NewV7())
	ct, keyID, public, err := providers.Seal(s.deps.Keyring, id, cfg)
	if err != nil {
		return nil, err
	}
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (*SendingProvider, error) {
		if err := s.checkPlanLimit(ctx, tx, caller.AccountID, plans.LimitProviders); err != nil { // billing.go
			return nil, err
		}
		n, err := s.q.ProviderCountByAccount(ctx, tx, caller.AccountID)
		if err != nil {
			return nil, err
		}
		if n >= providers.MaxPerAccount {
			return nil, Conflict("%s", providers.ErrLimit.Error())
		}
		row, err := s.q.ProviderInsert(ctx, tx, dbsqlc.ProviderInsertParams{
			ID: id, AccountID: caller.AccountID, Kind: req.Kind, Label: label, Config: public,
			SecretCiphertext: ct, SecretKeyID: keyID,
		})
		if dbutil.IsUniqueViolation(err, "sending_providers_account_label_key") {
			return nil, Conflict("a sending provider labelled %q already exists", label)
		}
		if err != nil {
			return nil, err
		}
		out := providerFromRow(&row, s.publicBase(), nil)
		return &out, nil
	})
}

func (s *Server) updateProvider(ctx context.Context, req *UpdateProviderRequest) (*SendingProvider, error) {
	caller := mustCaller(ctx)
	var label string
	if req.Label != nil {
		var err error
		if label, err = providers.NormalizeLabel(*req.Label); err != nil {
			return nil, providerConfigError(err)
		}
	}
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (*SendingProvider, error) {
		cur, err := s.q.ProviderGetByID(ctx, tx, dbsqlc.ProviderGetByIDParams{ID: req.ID, AccountID: caller.AccountID})
		if dbutil.IsNotFound(err) {
			return nil, NotFound("sending provider")
		}
		if err != nil {
			return nil, err
		}
		p := dbsqlc.ProviderUpdateParams{
			ID: cur.ID, AccountID: caller.AccountID, Label: cur.Label, Config: cur.Config,
			SecretCiphertext: cur.SecretCiphertext, SecretKeyID: cur.SecretKeyID,
		}
		if req.Label != nil {
			p.Label = label
		}
		if req.Config != nil {
			cfg := req.Config.toCapability()
			if _, err := providers.Validate(cur.Kind, cfg); err != nil {
				return nil, providerConfigError(err)
			}
			if p.SecretCiphertext, p.SecretKeyID, p.Config, err = providers.Seal(s.deps.Keyring, cur.ID, cfg); err != nil {
				return nil, err
			}
		}
		if _, err := s.q.ProviderUpdate(ctx, tx, p); err != nil {
			if dbutil.IsUniqueViolation(err, "sending_providers_account_label_key") {
				return nil, Conflict("a sending provider labelled %q already exists", p.Label)
			}
			return nil, err
		}
		s.providerCache.Forget(cur.ID)
		return s.getProvider(ctx, tx, cur.ID)
	})
}

func (s *Server) linkProvider(ctx context.Context, req *ProviderLinkRequest, link bool) (*SendingProvider, error) {
	caller := mustCaller(ctx)
	name, err := domainname.Normalize(req.Domain)
	if err != nil {
		return nil, InvalidField("domain", err.Error())
	}
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx pgx.Tx) (*SendingProvider, error) {
		prov, err := s.q.ProviderGetByID(ctx, tx, dbsqlc.ProviderGetByIDParams{ID: req.ID, AccountID: caller.AccountID})
		if dbutil.IsNotFound(err) {
			return nil, NotFound("sending provider")
		}
		if err != nil {
			return nil, err
		}
		dom, err := s.q.DomainGetByName(ctx, tx, dbsqlc.DomainGetByNameParams{AccountID: caller.AccountID, Name: name})
		if dbutil.IsNotFound(err) {
			if link {
				return nil, InvalidField("domain", "is not a registered domain of the account (POST /api/accounts/me/domains first)")
			}
			return nil, NotFound("link")
		}
		if err != nil {
			return nil, err
		}
		if link {
			if _, err := s.q.ProviderLinkInsert(ctx, tx, dbsqlc.ProviderLinkInsertParams{ProviderID: prov.ID, DomainID: dom.ID}); err != nil {
				return nil, err
			}
		} else {
			n, err := s.q.ProviderLinkDelete(ctx, tx, dbsqlc.ProviderLinkDeleteParams{ProviderID: prov.ID, DomainID: dom.ID})
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return nil, NotFound("link")
			}
		}
		return s.getProvider(ctx, tx, prov.ID)
	})
}

func (s *Server) ingestProvider(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return NotFound("sending provider")
	}
	ctx := c.UserContext()
	loaded, err := s.providerCache.Get(ctx, s.db, id, s.now())
	if errors.Is(err, providers.ErrNotFound) {
		return NotFound("sending provider")
	}
	if err != nil {
		return err
	}
	prov, cfg := loaded.Row, loaded.Config
	body := c.Body()
	if len(body) > maxProviderBody {
		return &Error{Status: http.StatusRequestEntityTooLarge, Detail: "webhook body larger than 1 MiB"}
	}
	now := s.now()
	v, err := providers.Verify(ctx, &prov, cfg, s.deps.SNSCerts, providers.Request{
		Header: func(name string) string { return strings.Clone(c.Get(name)) }, Body: body, ClientIP: c.IP(),
		Now: now, MaxAge: s.deps.ProviderWebhookMaxAge,
	})
	switch {
	case err == nil:
	case providers.IsSignatureError(err):
		return unauthorized("webhook signature or credentials did not verify: " + strings.TrimPrefix(err.Error(), "invalid provider signature: "))
	case providers.IsPayloadError(err):
		return BadRequest("%s", err.Error())
	case errors.Is(err, ses.ErrCertificate):
		c.Set(fiber.HeaderRetryAfter, "30")
		return &Error{Status: http.StatusServiceUnavailable, Detail: "the SNS signing certificate could not be fetched; retry later", Cause: err}
	default:
		return err
	}
	if v.Ignore {
		return c.JSON(ProviderIngressResult{})
	}
	raw := append([]byte(nil), body...) // Fiber reuses the body buffer
	res, err := s.ingester.Store(ctx, providers.Ingest{Provider: &prov, Verified: v, Body: raw, Now: now})
	if errors.Is(err, providers.ErrNotFound) {
		return NotFound("sending provider")
	}
	if errors.Is(err, providers.ErrReplayMismatch) {
		return unauthorized(err.Error())
	}
	if err != nil {
		return err
	}
	// The answer is built by hand (a UUID needs no escaping): this route is
	// the hot path of a sending provider.
	out := make([]byte, 0, 81)
	out = append(out, `{"payload_id":"`...)
	out = append(out, res.PayloadID.String()...)
	out = append(out, `","duplicate":`...)
	out = strconv.AppendBool(out, res.Duplicate)
	out = append(out, '}', '\n')
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(out)
}

// maxProviderBody caps a provider webhook (SendGrid batches stay well
// under it); BODY_LIMIT_BYTES applies first.
const maxProviderBody = 1 << 20

// PrepareJSONSchema implements jsonschema.Preparer: which settings config
// needs depends on kind, so the document shows a whole body that works.
func (CreateProviderRequest) PrepareJSONSchema(s *jsonschema.Schema) error {
	s.WithExamples(map[string]any{"kind": "ses", "label": "ses-production",
		"config": map[string]any{"topic_arns": []string{"arn:aws:sns:us-east-1:123456789012:ses-events"}}})
	return nil
}
