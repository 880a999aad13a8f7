package api

// adminEventRoutes registers its routes; they land with the events issue.
func (s *Server) adminEventRoutes() {}
