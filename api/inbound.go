package api

// inboundRoutes registers its routes; they land with the receivers issue.
func (s *Server) inboundRoutes() {}
