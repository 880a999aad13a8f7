package api

import (
	"context"

	"github.com/google/uuid"
)

// eventRoutes registers its routes; they land with the events issue.
func (s *Server) eventRoutes() {}

// fillDashboardEvents fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardEvents(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	return nil
}
