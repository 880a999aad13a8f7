package api

// adminSMSRoutes registers its routes; they land with the receivers issue.
func (s *Server) adminSMSRoutes() {}
