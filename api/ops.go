package api

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type emptyRequest struct{}

// StatusResponse answers the health probes.
type StatusResponse struct {
	Status string `json:"status" validate:"required"`
}

// openAPIDocument documents /openapi.json's body as a free-form object.
type openAPIDocument map[string]any

func (s *Server) opsRoutes() {
	Handle(s.router, Endpoint[emptyRequest, StatusResponse]{
		Method: "GET", Path: "/healthz", OperationID: "healthz", Tag: "operations", Auth: AuthOps,
		Summary:     "Liveness: the process is up",
		Description: "Answers 200 as long as the process serves HTTP; it does not touch the database.",
		Call: func(ctx context.Context, _ *emptyRequest) (*StatusResponse, error) {
			return &StatusResponse{Status: "ok"}, nil
		},
	})
	Handle(s.router, Endpoint[emptyRequest, StatusResponse]{
		Method: "GET", Path: "/readyz", OperationID: "readyz", Tag: "operations", Auth: AuthOps,
		Summary:     "Readiness: the database answers",
		Description: "200 when a query reaches Postgres within 2 s, otherwise 503 with a detail.",
		Errors:      []int{503},
		Call:        s.readyz,
	})

	s.router.rawTypes["GET /metrics"] = "text/plain"
	HandleRaw(s.router, Endpoint[emptyRequest, RawBody]{
		Method: "GET", Path: "/metrics", OperationID: "metrics", Tag: "operations", Auth: AuthOps,
		Summary:     "Prometheus metrics",
		Description: "Requests by route and status, request latency, database pool, Go runtime and process metrics, in the Prometheus text format.",
	}, adaptor.HTTPHandler(promhttp.HandlerFor(s.deps.Registry, promhttp.HandlerOpts{})))

	HandleRaw(s.router, Endpoint[emptyRequest, openAPIDocument]{
		Method: "GET", Path: "/openapi.json", OperationID: "openapi", Tag: "operations", Auth: AuthOps,
		Summary: "This API's OpenAPI 3.1 description",
	}, s.openapi())
}

// openapi makes the handler of GET /openapi.json, which builds the document on first request, when every route is known.
func (s *Server) openapi() fiber.Handler {
	var (
		once sync.Once
		doc  []byte
		err  error
	)
	return func(c *fiber.Ctx) error {
		once.Do(func() {
			if doc, err = s.router.OpenAPI(); err == nil {
				doc = append(tidyJSON(doc), '\n')
			}
		})
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(doc)
	}
}

// readyz serves GET /readyz: ok when the database answers within 2 s.
func (s *Server) readyz(ctx context.Context, _ *emptyRequest) (*StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.ping(ctx); err != nil {
		return nil, &Error{Status: 503, Detail: "database unreachable", Cause: err}
	}
	return &StatusResponse{Status: "ok"}, nil
}
