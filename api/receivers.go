package api

import (
	"context"

	"github.com/google/uuid"
)

// receiverRoutes registers its routes; they land with the receivers issue.
func (s *Server) receiverRoutes() {}

// fillDashboardReceivers fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardReceivers(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	return nil
}
