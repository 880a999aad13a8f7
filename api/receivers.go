package api

// receiverRoutes registers its routes; they land with the receivers issue.
func (s *Server) receiverRoutes() {}
