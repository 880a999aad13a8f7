package api

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/events"
)

// InjectEventRequest is POST /api/admin/accounts/{account_id}/events.
type InjectEventRequest struct {
	AccountID uuid.UUID `path:"account_id" format:"uuid"`
	EventType string    `json:"event_type" validate:"required,max=100" description:"A registered event type (GET /api/accounts/me/events/types)."`
	Payload   Payload   `json:"payload" validate:"required" description:"Must match the type's payload_schema."`
	Domain    *string   `json:"domain,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"The domain the event is about; subscriptions' domain_filter matches it."`
	Tags      []string  `json:"tags,omitempty" validate:"omitempty,max=20,dive,min=1,max=100" description:"Tags for subscriptions' tag_filter."`
	Severity  *string   `json:"severity,omitempty" validate:"omitempty,oneof=info warning critical" description:"Asks for a severity other than the type's default; the type's escalation rule (GET /api/accounts/me/events/types) may raise it, never lower it. Critical makes the event an alert."`
}

func (s *Server) adminEventRoutes() {
	Handle(s.router, Endpoint[InjectEventRequest, Event]{
		Method: "POST", Path: "/api/admin/accounts/{account_id}/events", Status: 201, OperationID: "adminInjectEvent", Tag: "admin", Auth: AuthAdmin,
		Summary: "Emit an event for an account (operators)",
		Description: "Emits an event of any registered type for the account exactly as a real producer would: it is " +
			"stored, listed, counted as an alert when critical, and delivered to the account's matching event " +
			"subscriptions. Operators use it to test integrations end to end. The payload is validated against the " +
			"type's JSON Schema (422 names the failing parts); an unknown account is 404.",
		Call: s.injectEvent,
	})
}

func (s *Server) injectEvent(ctx context.Context, req *InjectEventRequest) (*Event, error) {
	if _, ok := events.Lookup(req.EventType); !ok {
		return nil, InvalidField("event_type", "is not a registered event type; see GET /api/accounts/me/events/types")
	}
	raw := []byte(req.Payload)
	if trimmed := strings.TrimSpace(string(raw)); !strings.HasPrefix(trimmed, "{") {
		return nil, InvalidField("payload", "must be a JSON object")
	}
	if err := events.ValidatePayload(req.EventType, raw); err != nil {
		var pe *events.PayloadError
		if errors.As(err, &pe) {
			fields := make([]FieldError, len(pe.Problems))
			for i, p := range pe.Problems {
				fields[i] = FieldError{Field: "payload" + strings.ReplaceAll(p.Path, "/", "."), Message: p.Message}
			}
			e := Invalid(fields...)
			e.Detail = pe.Error()
			return nil, e
		}
		return nil, err
	}
	ev := events.Event{AccountID: req.AccountID, Type: req.EventType, Payload: Payload(raw), Tags: req.Tags}
	if req.Domain != nil {
		d, err := domainname.Normalize(*req.Domain)
		if err != nil {
			return nil, InvalidField("domain", err.Error())
		}
		ev.Domain = d
	}
	if req.Severity != nil {
		ev.Severity = events.Severity(*req.Severity)
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*Event, error) {
		if _, err := s.q.AccountGetByID(ctx, tx, req.AccountID); err != nil {
			if dbutil.IsNotFound(err) {
				return nil, NotFound("account")
			}
			return nil, err
		}
		row, err := s.deps.Emitter.Emit(ctx, tx, ev)
		if err != nil {
			return nil, err
		}
		e := eventFromRow(row)
		return &e, nil
	})
	return row, err
}

// PrepareJSONSchema implements jsonschema.Preparer: payload depends on
// event_type, so the document shows a whole body, from the type registry.
func (InjectEventRequest) PrepareJSONSchema(s *jsonschema.Schema) error {
	typ, ok := events.Lookup(events.TypeHealthScoreChanged)
	if !ok {
		return errors.New("no event type " + events.TypeHealthScoreChanged)
	}
	s.WithExamples(map[string]any{"event_type": typ.Name, "payload": typ.Example})
	return nil
}
