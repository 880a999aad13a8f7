package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/authproviders"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// AuthProvider is an external identity provider as the API shows it (never
// its webhook secret).
type AuthProvider struct {
	ID               uuid.UUID `json:"id" validate:"required"`
	Kind             string    `json:"kind" validate:"required" enum:"supabase,clerk,auth0,workos,oidc"`
	Name             string    `json:"name" validate:"required"`
	Issuer           string    `json:"issuer" validate:"required" description:"The iss claim of the provider's tokens."`
	JWKSURL          string    `json:"jwks_url" validate:"required"`
	Audience         *string   `json:"audience" validate:"required" description:"Required aud claim; null accepts any (only for supabase and clerk: oidc, auth0 and workos must pin one)."`
	SubjectClaim     string    `json:"subject_claim" validate:"required"`
	EmailClaim       string    `json:"email_claim" validate:"required"`
	HasWebhookSecret bool      `json:"has_webhook_secret" validate:"required"`
	WebhookURL       string    `json:"webhook_path" validate:"required" description:"Where the provider sends user events (relative to the API's base URL)."`
	CreatedAt        time.Time `json:"created_at" validate:"required"`
	UpdatedAt        time.Time `json:"updated_at" validate:"required"`
}

func authProviderFromRow(r dbsqlc.AuthProvider) AuthProvider {
	return AuthProvider{
		ID: r.ID, Kind: r.Kind, Name: r.Name, Issuer: r.Issuer, JWKSURL: r.JwksUrl, Audience: r.Audience,
		SubjectClaim: r.SubjectClaim, EmailClaim: r.EmailClaim, HasWebhookSecret: r.WebhookSecretCiphertext != nil,
		WebhookURL: "/api/webhooks/auth/" + r.ID.String(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// CreateAuthProviderRequest is the body of POST .../auth-providers.
type CreateAuthProviderRequest struct {
	Kind          string  `json:"kind" validate:"required,oneof=supabase clerk auth0 workos oidc"`
	Name          string  `json:"name,omitempty" validate:"max=100"`
	Issuer        string  `json:"issuer" validate:"required,max=2048" description:"Exactly the iss claim of the provider's tokens."`
	JWKSURL       string  `json:"jwks_url" validate:"required,max=2048,web_url" example:"https://example.com/.well-known/jwks.json" description:"https URL of the provider's JWK Set (fetched through the SSRF guard)."`
	Audience      *string `json:"audience,omitempty" validate:"omitempty,max=512"`
	SubjectClaim  string  `json:"subject_claim,omitempty" validate:"omitempty,max=100" description:"Claim carrying the user id; default sub."`
	EmailClaim    string  `json:"email_claim,omitempty" validate:"omitempty,max=100" description:"Claim carrying the email; default email."`
	WebhookSecret *string `json:"webhook_secret,omitempty" validate:"omitempty,max=256" description:"Signs the provider's user webhooks (whsec_... for Standard Webhooks and Svix/Clerk; WorkOS's secret). Stored encrypted, never shown."`
}

// UpdateAuthProviderRequest is the body of PATCH .../auth-providers/{id}.
type UpdateAuthProviderRequest struct {
	ID            uuid.UUID      `path:"id" format:"uuid"`
	Name          *string        `json:"name,omitempty" validate:"omitempty,max=100"`
	Issuer        *string        `json:"issuer,omitempty" validate:"omitempty,min=1,max=2048"`
	JWKSURL       *string        `json:"jwks_url,omitempty" validate:"omitempty,max=2048,web_url" example:"https://example.com/.well-known/jwks.json"`
	Audience      OptionalString `json:"audience,omitempty" description:"null accepts any audience."`
	SubjectClaim  *string        `json:"subject_claim,omitempty" validate:"omitempty,min=1,max=100"`
	EmailClaim    *string        `json:"email_claim,omitempty" validate:"omitempty,min=1,max=100"`
	WebhookSecret OptionalString `json:"webhook_secret,omitempty" description:"New secret (stored encrypted); null removes it."`
}

// AuthProviderPath names one provider.
type AuthProviderPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// AuthProviderLink binds an external user to the account.
type AuthProviderLink struct {
	ID         uuid.UUID `json:"id" validate:"required"`
	ProviderID uuid.UUID `json:"provider_id" validate:"required"`
	Subject    *string   `json:"subject" validate:"required"`
	Email      *string   `json:"email" validate:"required"`
	Source     string    `json:"source" validate:"required" enum:"api,webhook"`
	CreatedAt  time.Time `json:"created_at" validate:"required"`
}

func linkFromRow(r dbsqlc.AuthProviderLink) AuthProviderLink {
	return AuthProviderLink{ID: r.ID, ProviderID: r.ProviderID, Subject: r.Subject, Email: r.Email, Source: r.Source, CreatedAt: r.CreatedAt.UTC()}
}

// CreateLinkRequest is the body of POST .../auth-providers/{id}/links.
type CreateLinkRequest struct {
	_       atLeastOne
	ID      uuid.UUID `path:"id" format:"uuid"`
	Subject *string   `json:"subject,omitempty" validate:"omitempty,min=1,max=512" description:"The provider's user id (the subject claim)."`
	Email   *string   `json:"email,omitempty" validate:"omitempty,max=254,email_address" example:"user@example.com" description:"Or the user's email (the email claim)."`
}

// LinkPath names one link.
type LinkPath struct {
	ID     uuid.UUID `path:"id" format:"uuid"`
	LinkID uuid.UUID `path:"link_id" format:"uuid"`
}

// AuthIngressRequest documents POST /api/webhooks/auth/{provider_id}.
type AuthIngressRequest struct {
	ProviderID uuid.UUID `path:"provider_id" format:"uuid"`
}

// AuthIngressResult says what an auth-provider webhook did.
type AuthIngressResult struct {
	Type      string `json:"type" validate:"required"`
	Applied   bool   `json:"applied" validate:"required" description:"False for a duplicate (same provider event id) or an event that does not touch links."`
	Duplicate bool   `json:"duplicate" validate:"required"`
}

// providerTokens makes the data API accept linked providers' tokens.
func (s *Server) providerTokens() {
	verifier := &authproviders.Verifier{DB: s.db, Client: s.deps.WebhookClient}
	s.verifyProviderToken = func(ctx context.Context, token, ourIssuer, account string) (*verifiedToken, bool, error) {
		v, handled, err := verifier.Verify(ctx, token, ourIssuer, account)
		if !handled {
			return nil, false, nil
		}
		if err != nil {
			return nil, true, err
		}
		return &verifiedToken{accountID: v.AccountID, claims: v.Claims}, true, nil
	}
}

func (s *Server) authProviderRoutes() {
	s.providerTokens()
	base := "/api/accounts/me/auth-providers"
	Handle(s.router, Endpoint[CreateAuthProviderRequest, AuthProvider]{
		Method: "POST", Path: base, Status: 201, OperationID: "createAuthProvider", Tag: "identity",
		Summary: "Trust an external identity provider",
		Description: "Its tokens read the data API for this account once their user is linked (POST .../links or the provider's user webhooks), " +
			"on requests that name the account in the " + authproviders.AccountHeader + " header. An issuer already configured on the account " +
			"is 409, and so is a provider beyond the cap of " + strconv.Itoa(authproviders.MaxPerAccount) + " per account.",
		Errors: []int{409},
		Call:   s.createAuthProvider,
	})
	Handle(s.router, Endpoint[emptyRequest, []AuthProvider]{
		Method: "GET", Path: base, OperationID: "listAuthProviders", Tag: "identity", Summary: "List the account's identity providers",
		Call: s.listAuthProviders,
	})
	Handle(s.router, Endpoint[AuthProviderPath, AuthProvider]{
		Method: "GET", Path: base + "/{id}", OperationID: "getAuthProvider", Tag: "identity", Summary: "Get an identity provider",
		Errors: []int{404},
		Call:   s.getAuthProvider,
	})
	Handle(s.router, Endpoint[UpdateAuthProviderRequest, AuthProvider]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateAuthProvider", Tag: "identity", Summary: "Change an identity provider",
		Errors: []int{404, 409},
		Call: func(ctx context.Context, req *UpdateAuthProviderRequest) (*AuthProvider, error) {
			return s.updateAuthProvider(ctx, req.ID, req)
		},
	})
	Handle(s.router, Endpoint[AuthProviderPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteAuthProvider", Tag: "identity",
		Summary: "Stop trusting an identity provider (its links go too)", Errors: []int{404},
		Call: s.deleteAuthProvider,
	})
	Handle(s.router, Endpoint[CreateLinkRequest, AuthProviderLink]{
		Method: "POST", Path: base + "/{id}/links", Status: 201, OperationID: "createAuthProviderLink", Tag: "identity",
		Summary:     "Link an external user (by subject or email) to the account",
		Description: "Give subject, email or both. A subject or email already linked for this provider is 409.",
		Errors:      []int{404, 409},
		Call:        s.createLink,
	})
	Handle(s.router, Endpoint[AuthProviderPath, []AuthProviderLink]{
		Method: "GET", Path: base + "/{id}/links", OperationID: "listAuthProviderLinks", Tag: "identity", Summary: "List a provider's links",
		Errors: []int{404},
		Call:   s.listAuthProviderLinks,
	})
	Handle(s.router, Endpoint[LinkPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}/links/{link_id}", Status: 204, OperationID: "deleteAuthProviderLink", Tag: "identity",
		Summary: "Unlink an external user", Errors: []int{404},
		Call: s.deleteAuthProviderLink,
	})
	HandleRaw(s.router, Endpoint[AuthIngressRequest, AuthIngressResult]{
		Method: "POST", Path: "/api/webhooks/auth/{provider_id}", OperationID: "ingestAuthProviderEvent", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "An identity provider's user events (create, update and remove links)",
		Description: "Signed with Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature), the same under Svix's names " +
			"(svix-id, svix-timestamp, svix-signature: Clerk), or WorkOS-Signature (t=<ms>, v1=<hex HMAC-SHA256 of t.body>), under the " +
			"provider's webhook_secret, verified on the raw body. user.created and user.updated create or update the user's link, " +
			"user.deleted removes it (also Supabase database webhooks on auth.users: INSERT, UPDATE, DELETE). Each provider event id " +
			"applies once (for Supabase, whose retries carry new webhook ids, the payload itself identifies the change). An event " +
			"whose id, type, user id or email holds a NUL character (which cannot be stored) is 422.",
		Errors:    []int{401, 404},
		BodyTypes: []string{"application/json"},
	}, s.authIngress)
}

// listAuthProviders serves GET /api/accounts/me/auth-providers: list the account's identity providers.
func (s *Server) listAuthProviders(ctx context.Context, _ *emptyRequest) (*[]AuthProvider, error) {
	rows, err := s.q.AuthProviderListByAccount(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	out := make([]AuthProvider, len(rows))
	for i, r := range rows {
		out[i] = authProviderFromRow(r)
	}
	return &out, nil
}

// getAuthProvider serves GET /api/accounts/me/auth-providers/{id}: get an identity provider.
func (s *Server) getAuthProvider(ctx context.Context, req *AuthProviderPath) (*AuthProvider, error) {
	row, err := s.accountAuthProvider(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	p := authProviderFromRow(row)
	return &p, nil
}

// deleteAuthProvider serves DELETE /api/accounts/me/auth-providers/{id}: stop trusting an identity provider (its links go too).
func (s *Server) deleteAuthProvider(ctx context.Context, req *AuthProviderPath) (*NoContent, error) {
	n, err := s.q.AuthProviderDelete(ctx, s.db, dbsqlc.AuthProviderDeleteParams{ID: req.ID, AccountID: mustCaller(ctx).AccountID})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, NotFound("auth provider")
	}
	return &NoContent{}, nil
}

// listAuthProviderLinks serves GET /api/accounts/me/auth-providers/{id}/links: list a provider's links.
func (s *Server) listAuthProviderLinks(ctx context.Context, req *AuthProviderPath) (*[]AuthProviderLink, error) {
	if _, err := s.accountAuthProvider(ctx, req.ID); err != nil {
		return nil, err
	}
	rows, err := s.q.AuthProviderLinkList(ctx, s.db, dbsqlc.AuthProviderLinkListParams{ProviderID: req.ID, AccountID: mustCaller(ctx).AccountID})
	if err != nil {
		return nil, err
	}
	out := make([]AuthProviderLink, len(rows))
	for i, r := range rows {
		out[i] = linkFromRow(r)
	}
	return &out, nil
}

// deleteAuthProviderLink serves DELETE /api/accounts/me/auth-providers/{id}/links/{link_id}: unlink an external user.
func (s *Server) deleteAuthProviderLink(ctx context.Context, req *LinkPath) (*NoContent, error) {
	n, err := s.q.AuthProviderLinkDelete(ctx, s.db, dbsqlc.AuthProviderLinkDeleteParams{ID: req.LinkID, ProviderID: req.ID, AccountID: mustCaller(ctx).AccountID})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, NotFound("link")
	}
	return &NoContent{}, nil
}

// accountAuthProvider loads one of the caller's providers; 404 when it has none with that id.
func (s *Server) accountAuthProvider(ctx context.Context, id uuid.UUID) (dbsqlc.AuthProvider, error) {
	row, err := s.q.AuthProviderGet(ctx, s.db, dbsqlc.AuthProviderGetParams{ID: id, AccountID: mustCaller(ctx).AccountID})
	if dbutil.IsNotFound(err) {
		return row, NotFound("auth provider")
	}
	return row, err
}

func checkJWKSURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return InvalidField(field, "must be an http(s) URL")
	}
	return nil
}

func (s *Server) sealProviderSecret(id uuid.UUID, secret string) ([]byte, *string, error) {
	if s.deps.Keyring == nil {
		return nil, nil, Unavailable("secrets cannot be stored: MAILWATCH_SECRET_KEY is unset")
	}
	sealed, keyID, err := s.deps.Keyring.Seal([]byte(secret), id[:])
	if err != nil {
		return nil, nil, err
	}
	return sealed, &keyID, nil
}

// audienceRequired names the kinds whose issuer also signs tokens for other
// applications (a generic OIDC issuer such as Google's, an Auth0 tenant with
// several APIs, WorkOS): without an audience, a token minted for someone
// else's app by the same issuer would read this account's rows.
func audienceRequired(kind string) bool {
	return kind == "oidc" || kind == "auth0" || kind == "workos"
}

func checkAudience(kind string, audience *string) error {
	if audienceRequired(kind) && (audience == nil || strings.TrimSpace(*audience) == "") {
		return InvalidField("audience", "is required for kind "+kind+": its issuer signs tokens for other applications too, so the aud claim must be pinned")
	}
	return nil
}

func (s *Server) createAuthProvider(ctx context.Context, req *CreateAuthProviderRequest) (*AuthProvider, error) {
	if err := checkJWKSURL("jwks_url", req.JWKSURL); err != nil {
		return nil, err
	}
	if err := checkAudience(req.Kind, req.Audience); err != nil {
		return nil, err
	}
	id := uuid.Must(uuid.NewV7())
	params := dbsqlc.AuthProviderInsertParams{
		ID: id, AccountID: mustCaller(ctx).AccountID, Kind: req.Kind, Name: req.Name, Issuer: req.Issuer, JwksUrl: req.JWKSURL,
		Audience: req.Audience, SubjectClaim: valueOr(req.SubjectClaim, "sub"), EmailClaim: valueOr(req.EmailClaim, "email"),
	}
	if req.WebhookSecret != nil {
		sealed, keyID, err := s.sealProviderSecret(id, *req.WebhookSecret)
		if err != nil {
			return nil, err
		}
		params.WebhookSecretCiphertext, params.WebhookSecretKeyID = sealed, keyID
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.AuthProvider, error) {
		return authproviders.Create(ctx, tx, params)
	})
	if dbutil.IsUniqueViolation(err, "auth_providers_account_issuer_key") {
		return nil, Conflict("a provider with issuer %q already exists", req.Issuer)
	}
	if errors.Is(err, authproviders.ErrTooMany) {
		return nil, Conflict("%s; delete one first", err.Error())
	}
	if err != nil {
		return nil, err
	}
	p := authProviderFromRow(row)
	return &p, nil
}

func valueOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Server) updateAuthProvider(ctx context.Context, id uuid.UUID, req *UpdateAuthProviderRequest) (*AuthProvider, error) {
	params := dbsqlc.AuthProviderUpdateParams{
		ID: id, AccountID: mustCaller(ctx).AccountID, Name: req.Name, Issuer: req.Issuer, JwksUrl: req.JWKSURL,
		SubjectClaim: req.SubjectClaim, EmailClaim: req.EmailClaim,
	}
	if req.JWKSURL != nil {
		if err := checkJWKSURL("jwks_url", *req.JWKSURL); err != nil {
			return nil, err
		}
	}
	if req.Audience.Set {
		params.SetAudience = true
		if !req.Audience.Null {
			params.Audience = &req.Audience.Value
		}
	}
	if req.WebhookSecret.Set {
		params.SetSecret = true
		if !req.WebhookSecret.Null {
			sealed, keyID, err := s.sealProviderSecret(id, req.WebhookSecret.Value)
			if err != nil {
				return nil, err
			}
			params.WebhookSecretCiphertext, params.WebhookSecretKeyID = sealed, keyID
		}
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.AuthProvider, error) {
		if params.SetAudience {
			cur, err := s.q.AuthProviderGet(ctx, tx, dbsqlc.AuthProviderGetParams{ID: id, AccountID: params.AccountID})
			if err != nil {
				return cur, err
			}
			if err := checkAudience(cur.Kind, params.Audience); err != nil {
				return cur, err
			}
		}
		return s.q.AuthProviderUpdate(ctx, tx, params)
	})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("auth provider")
	}
	if dbutil.IsUniqueViolation(err, "auth_providers_account_issuer_key") {
		return nil, Conflict("a provider with this issuer already exists")
	}
	if err != nil {
		return nil, err
	}
	p := authProviderFromRow(row)
	return &p, nil
}

func (s *Server) createLink(ctx context.Context, req *CreateLinkRequest) (*AuthProviderLink, error) {
	if _, err := s.accountAuthProvider(ctx, req.ID); err != nil {
		return nil, err
	}
	params := dbsqlc.AuthProviderLinkInsertParams{
		ID: uuid.Must(uuid.NewV7()), ProviderID: req.ID, AccountID: mustCaller(ctx).AccountID, Subject: req.Subject, Source: "api",
	}
	if req.Email != nil {
		email, err := normalizeEmail("email", *req.Email)
		if err != nil {
			return nil, err
		}
		params.Email = &email
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.AuthProviderLink, error) {
		return s.q.AuthProviderLinkInsert(ctx, tx, params)
	})
	if dbutil.IsUniqueViolation(err, "") {
		return nil, Conflict("this user is already linked")
	}
	if err != nil {
		return nil, err
	}
	l := linkFromRow(row)
	return &l, nil
}

func (s *Server) authIngress(c *fiber.Ctx) error {
	ctx := c.UserContext()
	id, err := uuid.Parse(c.Params("provider_id"))
	if err != nil {
		return NotFound("auth provider")
	}
	p, err := s.q.AuthProviderGetByID(ctx, s.db, id)
	if dbutil.IsNotFound(err) {
		return NotFound("auth provider")
	}
	if err != nil {
		return err
	}
	if p.WebhookSecretCiphertext == nil || p.WebhookSecretKeyID == nil || s.deps.Keyring == nil {
		return unauthorized("this provider has no webhook secret; set webhook_secret first")
	}
	secret, err := s.deps.Keyring.Open(*p.WebhookSecretKeyID, p.WebhookSecretCiphertext, p.ID[:])
	if err != nil {
		return err
	}
	body := c.Body()
	headers := http.Header{}
	c.Request().Header.VisitAll(func(k, v []byte) { headers.Add(string(k), string(v)) })
	headerID, err := authproviders.VerifySignature(string(secret), headers, body, s.now())
	if err != nil {
		// Whatever failed (a forged request, or a stored secret that is no
		// Standard Webhooks secret), the caller learns only that it did not
		// verify; the cause goes to the log.
		e := unauthorized("webhook signature does not verify")
		if !errors.Is(err, authproviders.ErrSignature) {
			s.logger.Warn("auth provider webhook secret unusable", slog.String("provider_id", p.ID.String()), slog.Any("error", err))
		}
		return e
	}
	ev, err := authproviders.ParseEvent(body)
	if err != nil {
		return InvalidField("body", err.Error())
	}
	res := AuthIngressResult{Type: ev.Type}
	if ev.Action != authproviders.ActionIgnore {
		applied, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (bool, error) {
			return authproviders.Apply(ctx, tx, p, ev, strings.Clone(headerID))
		})
		if errors.Is(err, authproviders.ErrNoEventID) {
			return InvalidField("body", "the event has no id (neither in the payload nor in the webhook-id header)")
		}
		if errors.Is(err, authproviders.ErrBadEventID) {
			return InvalidField("webhook-id", err.Error())
		}
		if dbutil.IsUniqueViolation(err, "auth_provider_links_email_key") {
			return Conflict("another link of this provider has this email")
		}
		if err != nil {
			return err
		}
		res.Applied, res.Duplicate = applied, !applied
	}
	return writeResponse(c, http.StatusOK, &res)
}

// PrepareJSONSchema implements jsonschema.Preparer: the kinds whose issuer
// signs for other applications too need an audience (audienceRequired),
// which the document says as a condition on kind.
func (CreateAuthProviderRequest) PrepareJSONSchema(s *jsonschema.Schema) error {
	var pinned []any
	if kind, ok := s.Properties["kind"]; ok && kind.TypeObject != nil {
		for _, k := range kind.TypeObject.Enum {
			if name, _ := k.(string); audienceRequired(name) {
				pinned = append(pinned, name)
			}
		}
	}
	if len(pinned) == 0 {
		return nil
	}
	var audience jsonschema.Schema
	audience.WithType(jsonschema.String.Type()).WithPattern(`\S`)
	var kind jsonschema.Schema
	kind.WithEnum(pinned...)
	var cond, then jsonschema.Schema
	cond.WithRequired("kind").WithPropertiesItem("kind", kind.ToSchemaOrBool())
	then.WithRequired("audience").WithPropertiesItem("audience", audience.ToSchemaOrBool())
	s.WithIf(cond.ToSchemaOrBool()).WithThen(then.ToSchemaOrBool())
	return nil
}
