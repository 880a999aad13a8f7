package api

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Alert is a critical event with its acknowledgement.
type Alert struct {
	Event
	Acknowledged              bool       `json:"acknowledged" validate:"required"`
	AcknowledgedBy            *string    `json:"acknowledged_by" validate:"required" description:"Who investigated, as given when acknowledging."`
	AcknowledgedAt            *time.Time `json:"acknowledged_at" validate:"required"`
	Note                      *string    `json:"note" validate:"required"`
	AcknowledgedKeyIdentifier *string    `json:"acknowledged_key_identifier" validate:"required" description:"Identifier of the API key that acknowledged the alert."`
}

func alertFromRow(e dbsqlc.Event) Alert {
	a := Alert{Event: eventFromRow(e), Acknowledged: e.AcknowledgedAt != nil, AcknowledgedBy: e.AcknowledgedBy,
		Note: e.AcknowledgedNote, AcknowledgedKeyIdentifier: e.AcknowledgedKey}
	if e.AcknowledgedAt != nil {
		t := e.AcknowledgedAt.UTC()
		a.AcknowledgedAt = &t
	}
	return a
}

// ListAlertsRequest filters GET /api/accounts/me/alerts.
type ListAlertsRequest struct {
	Acknowledged *bool `query:"acknowledged" description:"true: acknowledged alerts only; false: unacknowledged only; absent: all."`
	PageParams
}

// AlertPath names one alert.
type AlertPath struct {
	EventID uuid.UUID `path:"event_id" format:"uuid"`
}

// AcknowledgeRequest is POST /api/accounts/me/alerts/{event_id}/acknowledge.
type AcknowledgeRequest struct {
	AlertPath
	AcknowledgedBy string  `json:"acknowledged_by" validate:"required,min=1,max=200,not_blank" description:"Who investigated (a name or email), 1 to 200 characters."`
	Note           *string `json:"note,omitempty" validate:"omitempty,max=2000" description:"Free text, up to 2000 characters."`
}

func (s *Server) alertRoutes() {
	s.ops.ListAlerts = Handle(s.router, Endpoint[ListAlertsRequest, Page[Alert]]{
		Method: "GET", Path: "/api/accounts/me/alerts", OperationID: "listAlerts", Tag: "alerts",
		Summary: "List the account's alerts (critical events)",
		Description: "Filtered by acknowledgement state and paginated like GET /api/accounts/me/events " +
			"(X-Next-Cursor and Link headers). A malformed acknowledged, since or cursor is 400.",
		Call: s.listAlerts,
	})
	s.ops.AcknowledgeAlert = Handle(s.router, Endpoint[AcknowledgeRequest, Alert]{
		Method: "POST", Path: "/api/accounts/me/alerts/{event_id}/acknowledge", OperationID: "acknowledgeAlert", Tag: "alerts",
		Summary: "Acknowledge an alert",
		Description: "Records who investigated and an optional note, and writes an alert_acknowledged audit event in the " +
			"same transaction. An alert that is already acknowledged is 409 (of concurrent acknowledgements exactly " +
			"one succeeds); an event that is not an alert, or is not the account's, is 404.",
		Errors: []int{404, 409},
		Call:   s.acknowledgeAlert,
	})
	s.ops.UnacknowledgeAlert = Handle(s.router, Endpoint[AlertPath, Alert]{
		Method: "DELETE", Path: "/api/accounts/me/alerts/{event_id}/acknowledge", OperationID: "unacknowledgeAlert", Tag: "alerts",
		Summary: "Withdraw an alert's acknowledgement",
		Description: "Clears the acknowledgement and writes an alert_unacknowledged audit event (with the withdrawn " +
			"acknowledgement) in the same transaction. An alert that is not acknowledged is 409; an event that is not " +
			"an alert, or is not the account's, is 404.",
		Errors: []int{404, 409},
		Call:   s.unacknowledgeAlert,
	})
}

func (s *Server) listAlerts(ctx context.Context, req *ListAlertsRequest) (*Page[Alert], error) {
	f, q, err := req.filter(mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	f.AlertsOnly = true
	f.Acknowledged = req.Acknowledged
	if req.Acknowledged != nil {
		q.Set("acknowledged", strconv.FormatBool(*req.Acknowledged))
	}
	rows, next, err := events.List(ctx, s.db, f)
	if err != nil {
		return nil, err
	}
	page := &Page[Alert]{Items: make([]Alert, len(rows)), next: next, path: "/api/accounts/me/alerts", query: q}
	for i, r := range rows {
		page.Items[i] = alertFromRow(r)
	}
	return page, nil
}

// alertStateError explains why a transition did not apply: the event is
// not the account's alert (404) or is not in the state the transition
// leaves (409).
func (s *Server) alertStateError(ctx context.Context, tx dbutil.Tx, account, id uuid.UUID, acknowledging bool) error {
	row, err := s.q.EventGetByID(ctx, tx, dbsqlc.EventGetByIDParams{ID: id, AccountID: account})
	if dbutil.IsNotFound(err) || (err == nil && row.Severity != string(events.SeverityCritical)) {
		return NotFound("alert")
	}
	if err != nil {
		return err
	}
	if acknowledging {
		by := ""
		if row.AcknowledgedBy != nil {
			by = " by " + strconv.Quote(*row.AcknowledgedBy)
		}
		return Conflict("the alert is already acknowledged%s; withdraw the acknowledgement (DELETE) first", by)
	}
	return Conflict("the alert is not acknowledged")
}

type alertAcknowledgedPayload struct {
	AlertID        uuid.UUID `json:"alert_id"`
	AlertType      string    `json:"alert_type"`
	AcknowledgedBy string    `json:"acknowledged_by"`
	Note           *string   `json:"note"`
	KeyIdentifier  string    `json:"key_identifier"`
}

type alertUnacknowledgedPayload struct {
	AlertID                  uuid.UUID `json:"alert_id"`
	AlertType                string    `json:"alert_type"`
	PreviouslyAcknowledgedBy *string   `json:"previously_acknowledged_by"`
	PreviousNote             *string   `json:"previous_note"`
	KeyIdentifier            string    `json:"key_identifier"`
}

func derefOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) acknowledgeAlert(ctx context.Context, req *AcknowledgeRequest) (*Alert, error) {
	caller := mustCaller(ctx)
	by := strings.TrimSpace(req.AcknowledgedBy)
	if by == "" {
		return nil, InvalidField("acknowledged_by", "must not be blank")
	}
	var note *string
	if req.Note != nil && strings.TrimSpace(*req.Note) != "" {
		note = req.Note
	}
	now := s.now().UTC()
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*Alert, error) {
		row, err := s.q.AlertAcknowledge(ctx, tx, dbsqlc.AlertAcknowledgeParams{
			AcknowledgedAt: now, AcknowledgedBy: by, Note: note, KeyIdentifier: caller.KeyIdentifier,
			ID: req.EventID, AccountID: caller.AccountID,
		})
		if dbutil.IsNotFound(err) {
			return nil, s.alertStateError(ctx, tx, caller.AccountID, req.EventID, true)
		}
		if err != nil {
			return nil, err
		}
		if _, err := s.deps.Emitter.Emit(ctx, tx, events.Event{
			AccountID: caller.AccountID, Type: events.TypeAlertAcknowledged, Domain: derefOr(row.Domain), Tags: row.Tags, At: now,
			Payload: alertAcknowledgedPayload{AlertID: row.ID, AlertType: row.EventType, AcknowledgedBy: by, Note: note, KeyIdentifier: caller.KeyIdentifier},
		}); err != nil {
			return nil, err
		}
		a := alertFromRow(row)
		return &a, nil
	})
}

func (s *Server) unacknowledgeAlert(ctx context.Context, req *AlertPath) (*Alert, error) {
	caller := mustCaller(ctx)
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*Alert, error) {
		row, err := s.q.AlertUnacknowledge(ctx, tx, dbsqlc.AlertUnacknowledgeParams{ID: req.EventID, AccountID: caller.AccountID})
		if dbutil.IsNotFound(err) {
			return nil, s.alertStateError(ctx, tx, caller.AccountID, req.EventID, false)
		}
		if err != nil {
			return nil, err
		}
		if _, err := s.deps.Emitter.Emit(ctx, tx, events.Event{
			AccountID: caller.AccountID, Type: events.TypeAlertUnacknowledged, Domain: derefOr(row.Domain), Tags: row.Tags, At: s.now(),
			Payload: alertUnacknowledgedPayload{AlertID: row.ID, AlertType: row.EventType, PreviouslyAcknowledgedBy: row.PreviousBy,
				PreviousNote: row.PreviousNote, KeyIdentifier: caller.KeyIdentifier},
		}); err != nil {
			return nil, err
		}
		a := alertFromRow(dbsqlc.Event{ID: row.ID, AccountID: row.AccountID, EventType: row.EventType, Severity: row.Severity,
			Domain: row.Domain, Tags: row.Tags, Payload: row.Payload, CreatedAt: row.CreatedAt})
		return &a, nil
	})
}
