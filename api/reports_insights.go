package api

import "github.com/mailwatch/mailwatch/internal/reports"

func (s *Server) dmarcInsightRoutes(svc *reports.Service) {}
