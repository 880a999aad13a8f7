package api

import (
	"context"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/swaggest/openapi-go/openapi31"
)

// Router registers endpoints on the Fiber app with the middleware their
// auth mode needs and documents them.
type Router struct {
	app            *fiber.App
	reflector      *openapi31.Reflector
	validator      *validator.Validate
	guard          *guard
	requestTimeout time.Duration
	rawTypes       map[string]string
	// alsoStatuses are further success statuses of a route ("METHOD
	// /path") answered with the same body, as 206 for a partial page.
	alsoStatuses map[string][]int
	routes       []RouteInfo
}

// RouteInfo names one registered route, in OpenAPI path syntax.
type RouteInfo struct {
	Method string
	Path   string
}

// fiberPath converts /a/{id}/b to Fiber's /a/:id/b.
func fiberPath(p string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			b.WriteString(p)
			return b.String()
		}
		j := strings.IndexByte(p[i:], '}')
		b.WriteString(p[:i])
		b.WriteByte(':')
		b.WriteString(p[i+1 : i+j])
		p = p[i+j+1:]
	}
}

func (r *Router) add(method, path string, auth AuthMode, ownDeadline bool, h fiber.Handler) {
	var chain []fiber.Handler
	if !ownDeadline {
		chain = append(chain, deadline(r.requestTimeout))
	}
	switch auth {
	case AuthKey:
		chain = append(chain, r.guard.requireKey(false))
	case AuthAdmin:
		chain = append(chain, r.guard.requireKey(true))
	case AuthNone:
		chain = append(chain, r.guard.limitByIP(r.guard.limiter, "ip:"))
	case AuthIngress:
		chain = append(chain, r.guard.limitByIP(r.guard.ingress, "ingress:"))
	}
	chain = append(chain, h)
	r.app.Add(method, fiberPath(path), chain...)
	r.routes = append(r.routes, RouteInfo{Method: method, Path: path})
}

// Routes lists every registered route.
func (r *Router) Routes() []RouteInfo { return append([]RouteInfo(nil), r.routes...) }

// deadline bounds the request: fasthttp does not cancel a handler when the
// client goes away, so every request carries its own timeout.
func deadline(d time.Duration) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), d)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}
