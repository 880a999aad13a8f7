package api

import (
	"context"
)

// DashboardSummary counts what the account has. It grows as features land.
type DashboardSummary struct {
	APIKeys int64 `json:"api_keys" validate:"required" description:"Active API keys."`
}

func (s *Server) dashboardRoutes() {
	Handle(s.router, Endpoint[emptyRequest, DashboardSummary]{
		Method: "GET", Path: "/api/accounts/me/dashboard-summary", OperationID: "dashboardSummary", Tag: "accounts",
		Summary: "Counts of what the account has",
		Call: func(ctx context.Context, _ *emptyRequest) (*DashboardSummary, error) {
			caller := mustCaller(ctx)
			var out DashboardSummary
			var err error
			out.APIKeys, err = s.q.APIKeyCountActive(ctx, s.db, caller.AccountID)
			if err != nil {
				return nil, err
			}
			return &out, nil
		},
	})
}
