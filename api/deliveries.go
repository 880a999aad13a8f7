package api

import (
	"context"

	"github.com/google/uuid"
)

// deliveryRoutes registers its routes; they land with the webhook delivery issue.
func (s *Server) deliveryRoutes() {}

// fillDashboardWebhooks fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardWebhooks(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	return nil
}
