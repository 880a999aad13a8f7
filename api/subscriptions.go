package api

// subscriptionRoutes registers its routes; they land with the webhook delivery issue.
func (s *Server) subscriptionRoutes() {}
