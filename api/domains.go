package api

// domainRoutes registers its routes; they land with the domains issue.
func (s *Server) domainRoutes() {}
