package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
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
	FailingSince   *time.Time `json:"failing_since" validate:"required" description:"First failed push since the last success; null while healthy. After a day subscription_failing is raised (once), after 5 days the subscription is disabled; the next accepted push raises subscription_recovered."`
	MaxPerSecond   *int32     `json:"max_per_second" validate:"required" description:"Pushes started per second at most, across every worker; null means no bound."`
	MaxInFlight    *int32     `json:"max_in_flight" validate:"required" description:"Pushes in flight at once at most, across every worker; null means no bound."`
	// SecretRotatedAt and PreviousSecretExpiresAt describe the last
	// rotation of the signing secret.
	SecretRotatedAt         *time.Time `json:"secret_rotated_at" validate:"required" description:"When the signing secret was last rotated; null if never."`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at" validate:"required" description:"Until then pushes carry a second signature, under the secret the last rotation replaced; null when only the current secret signs."`
	CreatedAt               time.Time  `json:"created_at" validate:"required"`
	UpdatedAt               time.Time  `json:"updated_at" validate:"required"`
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
		MaxPerSecond: r.MaxPerSecond, MaxInFlight: r.MaxInFlight,
		SecretRotatedAt: whUTC(r.SecretRotatedAt), PreviousSecretExpiresAt: whUTC(r.PreviousSecretExpiresAt),
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
	URL           string   `json:"url" validate:"required,max=2048,web_url" example:"https://example.com/webhooks" description:"Absolute http(s) URL of the endpoint. Its addresses must be public unless the operator's allow-list admits them (SSRF guard, checked on save and at every delivery; a host name that does not resolve yet is accepted)."`
	EventTypes    []string `json:"event_types,omitempty" nullable:"true" validate:"omitempty,min=1,max=50" description:"Registered event types to deliver (GET .../events/types); omitted or null means every type."`
	DomainFilter  *string  `json:"domain_filter,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"Only events about this domain."`
	TagFilter     *string  `json:"tag_filter,omitempty" validate:"omitempty,min=1,max=64,not_blank" description:"Only events carrying this tag."`
	SigningSecret *string  `json:"signing_secret,omitempty" validate:"omitempty,max=128" description:"whsec_ followed by standard base64 of 24 to 64 bytes. Omitted: one is generated and returned once."`
	MaxPerSecond  *int32   `json:"max_per_second,omitempty" nullable:"true" validate:"omitempty,min=1,max=1000" description:"Bound on pushes started per second, across every worker; a push over it waits without using an attempt. Omitted or null: no bound."`
	MaxInFlight   *int32   `json:"max_in_flight,omitempty" nullable:"true" validate:"omitempty,min=1,max=100" description:"Bound on pushes in flight at once, across every worker; a push over it waits without using an attempt. Omitted or null: no bound."`
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

// OptionalInt is a PATCH integer field: absent (unchanged), null
// (cleared) or a 32-bit integer.
type OptionalInt struct {
	Set   bool
	Null  bool
	Value int32
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *OptionalInt) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(b, []byte("null")) {
		o.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &o.Value); err != nil {
		return errors.New("expected an integer or null")
	}
	return nil
}

// JSONSchema implements jsonschema.Exposer.
func (OptionalInt) JSONSchema() (jsonschema.Schema, error) {
	var s jsonschema.Schema
	s.AddType(jsonschema.Integer)
	s.AddType(jsonschema.Null)
	return s, nil
}

// change is the field as a subscriptions.Change field: nil when absent, a
// nil inner pointer when null.
func (o OptionalInt) change() **int32 {
	if !o.Set {
		return nil
	}
	var v *int32
	if !o.Null {
		v = &o.Value
	}
	return &v
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
	MaxPerSecond OptionalInt     `json:"max_per_second,omitempty" validate:"omitempty,min=1,max=1000" description:"New bound on pushes started per second; null removes it."`
	MaxInFlight  OptionalInt     `json:"max_in_flight,omitempty" validate:"omitempty,min=1,max=100" description:"New bound on pushes in flight at once; null removes it."`
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
		Call:    s.listSubscriptions,
	})
	Handle(s.router, Endpoint[SubscriptionPath, Subscription]{
		Method: "GET", Path: base + "/{id}", OperationID: "getEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary: "One event subscription",
		Call:    s.getSubscription,
	})
	s.ops.UpdateEventSubscription = Handle(s.router, Endpoint[UpdateSubscriptionRequest, Subscription]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary:     "Change an event subscription",
		Description: "Only the fields present change; null clears event_types (every type), domain_filter or tag_filter.",
		Call:        s.updateSubscription,
	})
	s.ops.DeleteEventSubscription = Handle(s.router, Endpoint[SubscriptionPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary:     "Delete an event subscription",
		Description: "Deletes the subscription and its deliveries; queued pushes are dropped.",
		Call:        s.deleteSubscription,
	})
	s.ops.TestEventSubscription = Handle(s.router, Endpoint[SubscriptionPath, SubscriptionTestResult]{
		Method: "POST", Path: base + "/{id}/test", OperationID: "testEventSubscription", Tag: "event subscriptions", Errors: []int{404},
		Summary: "Send a signed test event now",
		Description: "Pushes a synthetic event of type `test` to the subscription's url, signed with its secret, " +
			"and reports the outcome. Nothing is stored and nothing is retried; works on a disabled subscription too.",
		Call: s.testSubscription,
	})
	s.secretRoutes(base)
	s.subscriptionRecoverRoutes(base) // subscriptions_recover.go
}

// subscriptionError maps internal/subscriptions' errors to the API's
// answers; other errors pass as they are.
func subscriptionError(err error) error {
	var field *subscriptions.FieldError
	var max *subscriptions.LimitError
	var plan *billing.LimitError
	switch {
	case errors.Is(err, subscriptions.ErrNotFound):
		return NotFound("event subscription")
	case errors.As(err, &field):
		return InvalidField(field.Field, field.Message)
	case errors.As(err, &max):
		return Conflict("%s", max.Error())
	case errors.As(err, &plan):
		return &Error{Status: http.StatusPaymentRequired, Detail: plan.Error()}
	case errors.Is(err, subscriptions.ErrSecretUnreadable):
		return Unavailable("%s", subscriptions.ErrSecretUnreadable.Error())
	}
	return err
}

func (s *Server) subscriptionService() *subscriptions.Service {
	return &subscriptions.Service{Guard: s.deps.WebhookGuard, Keyring: s.deps.Keyring, Client: s.deps.WebhookClient, DefaultPlan: s.deps.DefaultPlan,
		Logger: s.deps.Logger}
}

// listSubscriptions serves GET /api/accounts/me/event-subscriptions: list the account's event subscriptions.
func (s *Server) listSubscriptions(ctx context.Context, _ *emptyRequest) (*[]Subscription, error) {
	rows, err := subscriptions.List(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	out := make([]Subscription, len(rows))
	for i, r := range rows {
		out[i] = subscriptionFromRow(r)
	}
	return &out, nil
}

// getSubscription serves GET /api/accounts/me/event-subscriptions/{id}: one event subscription.
func (s *Server) getSubscription(ctx context.Context, req *SubscriptionPath) (*Subscription, error) {
	row, err := subscriptions.Get(ctx, s.db, mustCaller(ctx).AccountID, req.ID)
	if err != nil {
		return nil, subscriptionError(err)
	}
	out := subscriptionFromRow(row)
	return &out, nil
}

// deleteSubscription serves DELETE /api/accounts/me/event-subscriptions/{id}: delete an event subscription.
func (s *Server) deleteSubscription(ctx context.Context, req *SubscriptionPath) (*NoContent, error) {
	if err := subscriptions.Delete(ctx, s.db, mustCaller(ctx).AccountID, req.ID); err != nil {
		return nil, subscriptionError(err)
	}
	return &NoContent{}, nil
}

// createSubscription serves POST /api/accounts/me/event-subscriptions: subscribe a URL to events.
func (s *Server) createSubscription(ctx context.Context, req *CreateSubscriptionRequest) (*NewSubscription, error) {
	row, secret, err := s.subscriptionService().Create(ctx, s.db, mustCaller(ctx).AccountID, subscriptions.New{
		URL: req.URL, EventTypes: req.EventTypes, DomainFilter: req.DomainFilter, TagFilter: req.TagFilter, SigningSecret: req.SigningSecret,
		MaxPerSecond: req.MaxPerSecond, MaxInFlight: req.MaxInFlight,
	}, s.now())
	if err != nil {
		return nil, subscriptionError(err)
	}
	return &NewSubscription{Subscription: subscriptionFromRow(row), SigningSecret: secret}, nil
}

// updateSubscription serves PATCH /api/accounts/me/event-subscriptions/{id}: change an event subscription.
func (s *Server) updateSubscription(ctx context.Context, req *UpdateSubscriptionRequest) (*Subscription, error) {
	c := subscriptions.Change{URL: req.URL, Enabled: req.Enabled, MaxPerSecond: req.MaxPerSecond.change(), MaxInFlight: req.MaxInFlight.change()}
	if req.EventTypes.Set {
		types := req.EventTypes.Value
		if req.EventTypes.Null {
			types = nil
		}
		c.EventTypes = &types
	}
	c.DomainFilter = req.DomainFilter.change()
	c.TagFilter = req.TagFilter.change()
	row, err := s.subscriptionService().Update(ctx, s.db, mustCaller(ctx).AccountID, req.ID, c)
	if err != nil {
		return nil, subscriptionError(err)
	}
	out := subscriptionFromRow(row)
	return &out, nil
}

// change is the field as a subscriptions.Change field: nil when absent, a
// nil inner pointer when null.
func (o OptionalString) change() **string {
	if !o.Set {
		return nil
	}
	var v *string
	if !o.Null {
		v = &o.Value
	}
	return &v
}

// testSubscription serves POST /api/accounts/me/event-subscriptions/{id}/test: send a signed test event now.
func (s *Server) testSubscription(ctx context.Context, req *SubscriptionPath) (*SubscriptionTestResult, error) {
	a, err := s.subscriptionService().Test(ctx, s.db, mustCaller(ctx).AccountID, req.ID, s.now())
	if err != nil {
		return nil, subscriptionError(err)
	}
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
