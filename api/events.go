package api

// eventRoutes registers its routes; they land with the events issue.
func (s *Server) eventRoutes() {}
