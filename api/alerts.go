package api

// alertRoutes registers its routes; they land with the events issue.
func (s *Server) alertRoutes() {}
