package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Subscription limits.
const (
	maxSubscriptionsPerAccount = 100
	maxEventTypesPerFilter     = 50
	maxTagLength               = 64
	// urlCheckTimeout bounds the DNS resolution of a destination at create
	// and update time.
	urlCheckTimeout = 5 * time.Second
)

// Subscription is an event subscription as the API shows it. The signing
// secret is never shown after creation.
type Subscription struct {
	ID             uuid.UUID  `json:"id" validate:"required"`
	URL            string     `json:"url" validate:"required"`
	EventTypes     []string   `json:"event_types" validate:"required" description:"Types delivered; null means every type."`
	DomainFilter   *string    `json:"domain_filter" validate:"required" description:"Only events about this domain; null means any."`
	TagFilter      *string    `json:"tag_filter" validate:"required" description:"Only events carrying this tag; null means any."`
	Enabled        bool       `json:"enabled" validate:"required"`
	DisabledReason *string    `json:"disabled_reason" validate:"required" description:"Why mailwatch disabled the subscription (410 Gone, 5 days of failures); null when enabled or disabled by the account."`
	DisabledAt     *time.Time `json:"disabled_at" validate:"required"`
	LastSuccessAt  *time.Time `json:"last_success_at" validate:"required" description:"Last successful push (updated at most once a minute)."`
	FailingSince   *time.Time `json:"failing_since" validate:"required" description:"First failed push since the last success; null while healthy. After 5 days the subscription is disabled."`
	CreatedAt      time.Time  `json:"created_at" validate:"required"`
	UpdatedAt      time.Time  `json:"updated_at" validate:"required"`
}

// NewSubscription is a subscription as returned once, at creation.
type NewSubscription struct {
	Subscription
	SigningSecret string `json:"signing_secret" validate:"required" description:"The whsec_ secret that signs every push (Standard Webhooks). Shown only in this response; stored encrypted."`
}

func subscriptionFromRow(r dbsqlc.EventSubscription) Subscription {
	return Subscription{
		ID: r.ID, URL: r.URL, EventTypes: r.EventTypes, DomainFilter: r.DomainFilter, TagFilter: r.TagFilter,
		Enabled: r.Enabled, DisabledReason: r.DisabledReason, DisabledAt: whUTC(r.DisabledAt),
		LastSuccessAt: whUTC(r.LastSuccessAt), FailingSince: whUTC(r.FailingSince),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// whUTC copies t in UTC; nil stays nil.
func whUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateSubscriptionRequest is the body of POST .../event-subscriptions.
type CreateSubscriptionRequest struct {
	URL           string   `json:"url" validate:"required,max=2048,web_url" example:"https://example.com/webhooks" description:"Absolute http(s) URL of the endpoint. Its addresses must be public unless WEBHOOK_ALLOWED_CIDRS admits them (SSRF guard, checked on save and at every delivery; a host name that does not resolve yet is accepted)."`
	EventTypes    []string `json:"event_types,omitempty" nullable:"true" validate:"omitempty,min=1,max=50" description:"Registered event types to deliver (GET .../events/types); omitted or null means every type."`
	DomainFilter  *string  `json:"domain_filter,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"Only events about this domain."`
	TagFilter     *string  `json:"tag_filter,omitempty" validate:"omitempty,min=1,max=64,not_blank" description:"Only events carrying this tag."`
	SigningSecret *string  `json:"signing_secret,omitempty" validate:"omitempty,max=128" description:"whsec_ followed by standard base64 of 24 to 64 bytes. Omitted: one is generated and returned once."`
}

// OptionalString is a PATCH field: absent (unchanged), null (cleared) or
// a string.
type OptionalString struct {
	Set   bool
	Null  bool
	Value string
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *OptionalString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(b, []byte("null")) {
		o.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &o.Value); err != nil {
		return errors.New("expected a string or null")
	}
	return nil
}

// JSONSchema implements jsonschema.Exposer.
func (OptionalString) JSONSchema() (jsonschema.Schema, error) {
	var s jsonschema.Schema
	s.AddType(jsonschema.String)
	s.AddType(jsonschema.Null)
	return s, nil
}

// OptionalStrings is a PATCH list field: absent, null or a list.
type OptionalStrings struct {
	Set   bool
	Null  bool
	Value []string
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *OptionalStrings) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(b, []byte("null")) {
		o.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &o.Value); err != nil {
		return errors.New("expected an array of strings or null")
	}
	return nil
}

// JSONSchema implements jsonschema.Exposer.
func (OptionalStrings) JSONSchema() (jsonschema.Schema, error) {
	var item jsonschema.Schema
	item.AddType(jsonschema.String)
	var s jsonschema.Schema
	s.AddType(jsonschema.Array)
	s.AddType(jsonschema.Null)
	s.WithItems(*(&jsonschema.Items{}).WithSchemaOrBool(item.ToSchemaOrBool()))
	return s, nil
}

// UpdateSubscriptionRequest is the body of PATCH .../event-subscriptions/{id}.
type UpdateSubscriptionRequest struct {
	_            atLeastOne
	ID           uuid.UUID       `path:"id" format:"uuid"`
	URL          *string         `json:"url,omitempty" validate:"omitempty,max=2048,web_url" example:"https://example.com/webhooks" description:"New endpoint; checked like at creation."`
	EventTypes   OptionalStrings `json:"event_types,omitempty" validate:"omitempty,min=1,max=50" description:"New type list; null means every type."`
	DomainFilter OptionalString  `json:"domain_filter,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"New domain filter; null clears it."`
	TagFilter    OptionalString  `json:"tag_filter,omitempty" validate:"omitempty,min=1,max=64,not_blank" description:"New tag filter; null clears it."`
	Enabled      *bool           `json:"enabled,omitempty" description:"false stops deliveries (queued ones end failed); true resumes and clears the failure clock."`
}

// SubscriptionPath names one subscription.
type SubscriptionPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// SubscriptionTestResult is the outcome of a test push.
type SubscriptionTestResult struct {
	Status     string  `json:"status" validate:"required" enum:"delivered,failed" description:"delivered: the endpoint answered 2xx within 15 s."`
	StatusCode *int    `json:"status_code" validate:"required" description:"HTTP status answered; null when there was no answer."`
	ErrorClass *string `json:"error_class" validate:"required" description:"Short failure class (http_status, redirect, timeout, connection_refused, blocked_destination, ...); null on success."`
	Error      *string `json:"error" validate:"required" description:"What went wrong; null on success."`
	DurationMS int64   `json:"duration_ms" validate:"required"`
}

func (s *Server) subscriptionRoutes() {
	const base = "/api/accounts/me/event-subscriptions"
	s.ops.CreateEventSubscription = Handle(s.router, Endpoint[CreateSubscriptionRequest, NewSubscription]{
		Method: "POST", Path: base, Status: 201, OperationID: "createEventSubscription", Tag: "event subscriptions", Errors: []int{402, 409},
		Summary: "Subscribe a URL to events",
		Description: "Events matching the filters are pushed to url, signed per Standard Webhooks (webhook-id, " +
			"webhook-timestamp, webhook-signature). The signing secret is returned in this response only. " +
			"A url that is not absolute http(s) or resolves to a private, loopback or otherwise non-public address is 422.",
		Call: s.createSubscription,
	})
	s.ops.ListEventSubscriptions = Handle(s.router, Endpoint[emptyRequest, []Subscription]{
		Method: "GET", Path: base, OperationID: "listEventSubscriptions", Tag: "event subscriptions",
		Summary: "List the account's event subscriptions",
		Call: func(ctx context.Context, _ *emptyRequest) (*[]Subscription, error) {
			rows, err := s.q.SubscriptionListByAccount(ctx, s.db, dbsqlc.SubscriptionListByAccountParams{
				AccountID: mustCaller(ctx).AccountID, Max: maxSubscriptionsPerAccount,
			})
			if err != nil {
				return nil, err
			}
			out := make([]Subscription, len(rows))
			for i, r := range rows {
				out[i] = subscriptionFromRow(r)
			}
			return &out, nil
		},
	})
	Handle(s.router, Endpoint[SubscriptionPath, Subscription]{
		Method: "GET", Path: base + "/{id}", OperationID: "getEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary: "One event subscription",
		Call: func(ctx context.Context, req *SubscriptionPath) (*Subscription, error) {
			row, err := s.q.SubscriptionGetByID(ctx, s.db, dbsqlc.SubscriptionGetByIDParams{ID: req.ID, AccountID: mustCaller(ctx).AccountID})
			if dbutil.IsNotFound(err) {
				return nil, NotFound("event subscription")
			}
			if err != nil {
				return nil, err
			}
			out := subscriptionFromRow(row)
			return &out, nil
		},
	})
	s.ops.UpdateEventSubscription = Handle(s.router, Endpoint[UpdateSubscriptionRequest, Subscription]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary:     "Change an event subscription",
		Description: "Only the fields present change; null clears event_types (every type), domain_filter or tag_filter.",
		Call:        s.updateSubscription,
	})
	Handle(s.router, Endpoint[SubscriptionPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary:     "Delete an event subscription",
		Description: "Deletes the subscription and its deliveries; queued pushes are dropped.",
		Call: func(ctx context.Context, req *SubscriptionPath) (*NoContent, error) {
			n, err := s.q.SubscriptionDelete(ctx, s.db, dbsqlc.SubscriptionDeleteParams{ID: req.ID, AccountID: mustCaller(ctx).AccountID})
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return nil, NotFound("event subscription")
			}
			return &NoContent{}, nil
		},
	})
	s.ops.TestEventSubscription = Handle(s.router, Endpoint[SubscriptionPath, SubscriptionTestResult]{
		Method: "POST", Path: base + "/{id}/test", OperationID: "testEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary: "Send a signed test event now",
		Description: "Pushes a synthetic event of type `test` to the subscription's url, signed with its secret, " +
			"and reports the outcome. Nothing is stored and nothing is retried; works on a disabled subscription too.",
		Call: s.testSubscription,
	})
}

// checkURL validates a destination: absolute http(s), and (the advisory
// SSRF check) every address it resolves to is allowed.
func (s *Server) checkURL(ctx context.Context, raw string) error {
	ctx, cancel := context.WithTimeout(ctx, urlCheckTimeout)
	defer cancel()
	err := s.deps.WebhookGuard.CheckURL(ctx, raw, nil)
	var ue *netguard.URLError
	if errors.As(err, &ue) {
		return InvalidField("url", ue.Message)
	}
	return err
}

func checkEventTypes(types []string) error {
	if len(types) > maxEventTypesPerFilter {
		return InvalidField("event_types", fmt.Sprintf("must have at most %d items", maxEventTypesPerFilter))
	}
	if len(types) == 0 {
		return InvalidField("event_types", "must name at least one type; omit it (or send null) for every type")
	}
	seen := map[string]bool{}
	for i, t := range types {
		if _, ok := events.Lookup(t); !ok {
			return InvalidField(fmt.Sprintf("event_types[%d]", i), fmt.Sprintf("%q is not a registered event type (see GET /api/accounts/me/events/types)", t))
		}
		if seen[t] {
			return InvalidField(fmt.Sprintf("event_types[%d]", i), fmt.Sprintf("%q is listed twice", t))
		}
		seen[t] = true
	}
	return nil
}

func normalizeDomainFilter(raw string) (string, error) {
	d, err := domainname.Normalize(raw)
	if err != nil {
		return "", InvalidField("domain_filter", err.Error())
	}
	return d, nil
}

func checkTag(raw string) (string, error) {
	t := strings.TrimSpace(raw)
	if t == "" || len(t) > maxTagLength {
		return "", InvalidField("tag_filter", fmt.Sprintf("must be 1 to %d characters", maxTagLength))
	}
	return t, nil
}

func (s *Server) createSubscription(ctx context.Context, req *CreateSubscriptionRequest) (*NewSubscription, error) {
	caller := mustCaller(ctx)
	if err := s.checkURL(ctx, req.URL); err != nil {
		return nil, err
	}
	params := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: caller.AccountID, URL: req.URL}
	if req.EventTypes != nil {
		if err := checkEventTypes(req.EventTypes); err != nil {
			return nil, err
		}
		params.EventTypes = req.EventTypes
	}
	if req.DomainFilter != nil {
		d, err := normalizeDomainFilter(*req.DomainFilter)
		if err != nil {
			return nil, err
		}
		params.DomainFilter = &d
	}
	if req.TagFilter != nil {
		t, err := checkTag(*req.TagFilter)
		if err != nil {
			return nil, err
		}
		params.TagFilter = &t
	}
	secret := webhook.GenerateSecret()
	if req.SigningSecret != nil {
		if err := webhook.ValidateSecret(*req.SigningSecret); err != nil {
			return nil, InvalidField("signing_secret", strings.TrimPrefix(err.Error(), webhook.ErrInvalidSecret.Error()+": "))
		}
		secret = *req.SigningSecret
	}
	ct, keyID, err := s.deps.Keyring.Seal([]byte(secret), params.ID[:])
	if err != nil {
		return nil, err
	}
	params.SecretCiphertext, params.SecretKeyID = ct, keyID
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.EventSubscription, error) {
		if err := s.checkPlanLimit(ctx, tx, caller.AccountID, plans.LimitSubscriptions); err != nil { // billing.go
			return dbsqlc.EventSubscription{}, err
		}
		existing, err := s.q.SubscriptionListByAccount(ctx, tx, dbsqlc.SubscriptionListByAccountParams{AccountID: caller.AccountID, Max: maxSubscriptionsPerAccount})
		if err != nil {
			return dbsqlc.EventSubscription{}, err
		}
		if len(existing) >= maxSubscriptionsPerAccount {
			return dbsqlc.EventSubscription{}, Conflict("an account may have at most %d event subscriptions", maxSubscriptionsPerAccount)
		}
		return s.q.SubscriptionInsert(ctx, tx, params)
	})
	if err != nil {
		return nil, err
	}
	return &NewSubscription{Subscription: subscriptionFromRow(row), SigningSecret: secret}, nil
}

func (s *Server) updateSubscription(ctx context.Context, req *UpdateSubscriptionRequest) (*Subscription, error) {
	caller := mustCaller(ctx)
	if req.URL != nil {
		if err := s.checkURL(ctx, *req.URL); err != nil {
			return nil, err
		}
	}
	if req.EventTypes.Set && !req.EventTypes.Null {
		if err := checkEventTypes(req.EventTypes.Value); err != nil {
			return nil, err
		}
	}
	var domain, tag *string
	if req.DomainFilter.Set && !req.DomainFilter.Null {
		d, err := normalizeDomainFilter(req.DomainFilter.Value)
		if err != nil {
			return nil, err
		}
		domain = &d
	}
	if req.TagFilter.Set && !req.TagFilter.Null {
		t, err := checkTag(req.TagFilter.Value)
		if err != nil {
			return nil, err
		}
		tag = &t
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.EventSubscription, error) {
		cur, err := s.q.SubscriptionGetByID(ctx, tx, dbsqlc.SubscriptionGetByIDParams{ID: req.ID, AccountID: caller.AccountID})
		if err != nil {
			return cur, err
		}
		p := dbsqlc.SubscriptionUpdateParams{
			ID: cur.ID, AccountID: caller.AccountID, URL: cur.URL, EventTypes: cur.EventTypes,
			DomainFilter: cur.DomainFilter, TagFilter: cur.TagFilter, Enabled: cur.Enabled,
		}
		if req.URL != nil {
			p.URL = *req.URL
		}
		if req.EventTypes.Set {
			p.EventTypes = nil
			if !req.EventTypes.Null {
				p.EventTypes = slices.Clone(req.EventTypes.Value)
			}
		}
		if req.DomainFilter.Set {
			p.DomainFilter = domain
		}
		if req.TagFilter.Set {
			p.TagFilter = tag
		}
		if req.Enabled != nil {
			p.Enabled = *req.Enabled
		}
		return s.q.SubscriptionUpdate(ctx, tx, p)
	})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("event subscription")
	}
	if err != nil {
		return nil, err
	}
	out := subscriptionFromRow(row)
	return &out, nil
}

func (s *Server) testSubscription(ctx context.Context, req *SubscriptionPath) (*SubscriptionTestResult, error) {
	caller := mustCaller(ctx)
	sub, err := s.q.SubscriptionGetByID(ctx, s.db, dbsqlc.SubscriptionGetByIDParams{ID: req.ID, AccountID: caller.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("event subscription")
	}
	if err != nil {
		return nil, err
	}
	secret, err := s.deps.Keyring.Open(sub.SecretKeyID, sub.SecretCiphertext, sub.ID[:])
	if err != nil {
		return nil, Unavailable("the subscription's signing secret cannot be decrypted with the configured keys")
	}
	now := s.now().UTC()
	msgID := uuid.Must(uuid.NewV7())
	body, err := webhook.Payload("test", now, map[string]any{
		"id": msgID, "event_type": "test", "subscription_id": sub.ID,
		"message": "This is a test event sent from mailwatch.", "created_at": now,
	})
	if err != nil {
		return nil, err
	}
	a := webhook.Send(ctx, s.deps.WebhookClient, webhook.Request{URL: sub.URL, MsgID: msgID.String(), Body: body, Secret: string(secret)})
	out := &SubscriptionTestResult{Status: "failed", DurationMS: a.Duration.Milliseconds()}
	if a.Delivered {
		out.Status = "delivered"
	}
	if a.StatusCode != 0 {
		code := a.StatusCode
		out.StatusCode = &code
	}
	if a.ErrorClass != "" {
		class, msg := a.ErrorClass, a.Error
		out.ErrorClass, out.Error = &class, &msg
	}
	return out, nil
}
