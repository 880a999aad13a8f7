package api

import (
	"context"

	"github.com/google/uuid"
)

// DashboardSummary counts what the account has. Each feature fills its own
// section.
type DashboardSummary struct {
	APIKeys    int64              `json:"api_keys" validate:"required" description:"Active API keys."`
	Alerts     DashboardAlerts    `json:"alerts" validate:"required"`
	Events24h  DashboardSeverity  `json:"events_last_24h" validate:"required" description:"Events of the last 24 hours by severity: the current UTC hour so far and the 24 whole hours before it."`
	Receivers  DashboardReceivers `json:"receivers" validate:"required"`
	Domains    DashboardDomains   `json:"domains" validate:"required"`
	Deliveries DashboardWebhooks  `json:"deliveries" validate:"required"`
	Messages   DashboardMessages  `json:"messages_last_24h" validate:"required" description:"Sending-provider message events of the last 24 hours: the current UTC hour so far and the 24 whole hours before it."`
	Reports    DashboardReports   `json:"reports" validate:"required"`
}

// DashboardAlerts counts alerts.
type DashboardAlerts struct {
	Unacknowledged int64 `json:"unacknowledged" validate:"required"`
}

// DashboardSeverity counts events by severity.
type DashboardSeverity struct {
	Info     int64 `json:"info" validate:"required"`
	Warning  int64 `json:"warning" validate:"required"`
	Critical int64 `json:"critical" validate:"required"`
}

// DashboardReceivers counts receivers and their messages.
type DashboardReceivers struct {
	Active          int64 `json:"active" validate:"required" description:"Receivers that have not expired."`
	MessagesLast24h int64 `json:"messages_last_24h" validate:"required"`
}

// DashboardDomains summarises monitored domains.
type DashboardDomains struct {
	Total        int64    `json:"total" validate:"required"`
	AverageScore *float64 `json:"average_score" validate:"required" description:"Mean latest health score; null before any domain was scored."`
	AtRisk       int64    `json:"at_risk" validate:"required" description:"Domains whose latest score is below 50."`
}

// DashboardWebhooks counts webhook deliveries by status.
type DashboardWebhooks struct {
	Pending  int64 `json:"pending" validate:"required"`
	Retrying int64 `json:"retrying" validate:"required"`
	Failed   int64 `json:"failed" validate:"required"`
}

func (s *Server) dashboardRoutes() {
	s.ops.DashboardSummary = Handle(s.router, Endpoint[emptyRequest, DashboardSummary]{
		Method: "GET", Path: "/api/accounts/me/dashboard-summary", OperationID: "dashboardSummary", Tag: "accounts",
		Summary: "Counts of what the account has",
		Call:    s.dashboardSummary,
	})
}

// dashboardSummary serves GET /api/accounts/me/dashboard-summary: counts of what the account has.
func (s *Server) dashboardSummary(ctx context.Context, _ *emptyRequest) (*DashboardSummary, error) {
	account := mustCaller(ctx).AccountID
	var out DashboardSummary
	var err error
	if out.APIKeys, err = s.q.APIKeyCountActive(ctx, s.db, account); err != nil {
		return nil, err
	}
	for _, fill := range []func(context.Context, uuid.UUID, *DashboardSummary) error{
		s.fillDashboardEvents,    // events.go
		s.fillDashboardReceivers, // receivers.go
		s.fillDashboardDomains,   // domains.go
		s.fillDashboardWebhooks,  // deliveries.go
		s.fillDashboardMessages,  // messages.go
		s.fillDashboardReports,   // reports.go
	} {
		if err := fill(ctx, account, &out); err != nil {
			return nil, err
		}
	}
	return &out, nil
}
