package api

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	callerKey
	// routeLabelKey (a Fiber local) names the route in metrics when Fiber's
	// route path cannot: the dashboard's page at "/" (web.go).
	routeLabelKey
)

func requestID(c *fiber.Ctx) string {
	if id, ok := c.Locals(requestIDKey).(string); ok {
		return id
	}
	return ""
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// methodLabel maps a request method to a constant string: one that does not
// alias fasthttp's buffer, and from a fixed set, so that a client sending
// made-up methods cannot grow the metrics without bound.
func methodLabel(m string) string {
	for _, known := range [...]string{
		fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch,
		fiber.MethodDelete, fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace,
	} {
		if m == known {
			return known
		}
	}
	return "other"
}

// observe is the outermost middleware: request id, panic recovery, access
// log and metrics, in that order, so that even a panic is logged, counted
// and answered as JSON. The request id (X-Request-Id of the answer, request_id
// in every log line of the request) is always generated here; a client's
// X-Request-Id of at most 128 characters [A-Za-z0-9._-] is kept as
// client_request_id in the access log, and any other is ignored.
func (s *Server) observe() fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		start := time.Now()
		// Every request gets an id of ours, unique whatever the client sends;
		// a client's own X-Request-Id, when well-formed, is logged beside it.
		id := uuid.Must(uuid.NewV7()).String()
		clientID := string(c.Request().Header.Peek(fiber.HeaderXRequestID))
		if !validRequestID(clientID) {
			clientID = ""
		}
		c.Locals(requestIDKey, id)
		c.Set(fiber.HeaderXRequestID, id)
		c.SetUserContext(context.WithValue(c.UserContext(), requestIDKey, id))

		s.inflight.Add(1)
		defer s.inflight.Add(-1)

		func() {
			defer func() {
				if p := recover(); p != nil {
					s.logger.ErrorContext(c.UserContext(), "panic serving request",
						slog.String("request_id", id), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = c.Next()
		}()
		if err != nil {
			if herr := s.app.ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
			err = nil
		}

		status := c.Response().StatusCode()
		// Labels and log values outlive this request (the metric vectors keep
		// the strings they were created with), while Fiber's c.Method(),
		// c.Path() and an unmatched route's Path point into buffers fasthttp
		// reuses for the connection's next request: copy them.
		method := methodLabel(c.Method())
		route := "unmatched"
		if r := c.Route(); r != nil && r.Path != "/" && r.Path != "" {
			route = strings.Clone(r.Path)
		} else if label, ok := c.Locals(routeLabelKey).(string); ok && status != fiber.StatusNotFound {
			route = label
		}
		elapsed := time.Since(start)
		s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
		s.metrics.latency.WithLabelValues(method, route).Observe(elapsed.Seconds())

		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", method),
			slog.String("route", route),
			slog.String("path", strings.Clone(c.Path())),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.String("ip", c.IP()),
		}
		if clientID != "" {
			attrs = append(attrs, slog.String("client_request_id", clientID))
		}
		if caller, ok := CallerFrom(c.UserContext()); ok {
			attrs = append(attrs, slog.String("account_id", caller.AccountID.String()), slog.String("key", caller.KeyIdentifier))
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		s.logger.LogAttrs(c.UserContext(), level, "request", attrs...)
		return nil
	}
}
