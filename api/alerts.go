package api

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/alerts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
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
	if req.Acknowledged != nil {
		q.Set("acknowledged", strconv.FormatBool(*req.Acknowledged))
	}
	rows, next, err := alerts.List(ctx, s.db, f, req.Acknowledged)
	if err != nil {
		return nil, err
	}
	page := newPage(make([]Alert, len(rows)), "/api/accounts/me/alerts", q)
	for i, r := range rows {
		page.Items[i] = alertFromRow(r)
	}
	page.setNext(cursorString(next))
	return page, nil
}

// alertError maps internal/alerts' errors to the API's answers.
func alertError(err error) error {
	var already *alerts.AlreadyAcknowledgedError
	switch {
	case errors.Is(err, alerts.ErrNotFound):
		return NotFound("alert")
	case errors.As(err, &already):
		return Conflict("%s", already.Error())
	case errors.Is(err, alerts.ErrNotAcknowledged):
		return Conflict("the alert is not acknowledged")
	case errors.Is(err, alerts.ErrBlankAcknowledger):
		return InvalidField("acknowledged_by", "must not be blank")
	}
	return err
}

func derefOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) acknowledgeAlert(ctx context.Context, req *AcknowledgeRequest) (*Alert, error) {
	caller := mustCaller(ctx)
	row, err := alerts.Acknowledge(ctx, s.db, s.deps.Emitter, caller.AccountID, req.EventID,
		alerts.Acknowledgement{By: req.AcknowledgedBy, Note: req.Note, KeyIdentifier: caller.KeyIdentifier}, s.now())
	if err != nil {
		return nil, alertError(err)
	}
	a := alertFromRow(row)
	return &a, nil
}

func (s *Server) unacknowledgeAlert(ctx context.Context, req *AlertPath) (*Alert, error) {
	caller := mustCaller(ctx)
	row, err := alerts.Unacknowledge(ctx, s.db, s.deps.Emitter, caller.AccountID, req.EventID, caller.KeyIdentifier, s.now())
	if err != nil {
		return nil, alertError(err)
	}
	a := alertFromRow(row)
	return &a, nil
}
