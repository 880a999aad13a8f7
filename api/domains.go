package api

import (
	"context"

	"github.com/google/uuid"
)

// domainRoutes registers its routes; they land with the domains issue.
func (s *Server) domainRoutes() {}

// fillDashboardDomains fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardDomains(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	return nil
}
