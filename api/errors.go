package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/internal/dataapi"
)

// FieldError names one invalid field of a 422 response, as the field is
// spelled in JSON (or in the query string or path).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the one error type handlers return to choose a status. Detail is
// shown to the client; Cause only goes to the log.
type Error struct {
	Status int
	Detail string
	Fields []FieldError
	// Record, when set, is the DNS record the error is about (body.record).
	Record  *ErrorRecord
	Headers map[string]string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Detail, e.Cause)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Detail)
}

func (e *Error) Unwrap() error { return e.Cause }

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Detail string       `json:"detail" validate:"required"`
	Errors []FieldError `json:"errors,omitempty"`
}

// RecordErrorBody is the error body of a DNS recommendation's apply: an
// ErrorBody that may also name the record.
type RecordErrorBody struct {
	Detail string       `json:"detail" validate:"required"`
	Errors []FieldError `json:"errors,omitempty"`
	Record *ErrorRecord `json:"record,omitempty" description:"On a DNS recommendation's 409, the record the zone now holds; on its 422, the record to publish by hand."`
}

// ErrorRecord is the DNS record (one RRset) an error is about.
type ErrorRecord struct {
	Name     string   `json:"name" validate:"required"`
	Type     string   `json:"type" validate:"required"`
	Current  []string `json:"current" validate:"required" description:"The values held now (those of the recommendation's kind)."`
	Proposed []string `json:"proposed" validate:"required" description:"The values to publish in their place."`
}

// BadRequest is a request that cannot be parsed (400).
func BadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Detail: fmt.Sprintf(format, args...)}
}

// NotFound is a resource that does not exist or belongs to another account.
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Detail: what + " not found"}
}

// Conflict is a request that clashes with the current state (409).
func Conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Detail: fmt.Sprintf(format, args...)}
}

// Gone is a resource that has expired (410).
func Gone(format string, args ...any) *Error {
	return &Error{Status: http.StatusGone, Detail: fmt.Sprintf(format, args...)}
}

// Unavailable is a request that cannot be served now (503).
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Detail: fmt.Sprintf(format, args...)}
}

// Invalid is a parsed request with invalid fields (422).
func Invalid(fields ...FieldError) *Error {
	detail := "validation failed"
	if len(fields) == 1 {
		detail = fields[0].Field + ": " + fields[0].Message
	} else if len(fields) > 1 {
		detail = fmt.Sprintf("validation failed for %d fields; first: %s: %s", len(fields), fields[0].Field, fields[0].Message)
	}
	return &Error{Status: http.StatusUnprocessableEntity, Detail: detail, Fields: fields}
}

// InvalidField is Invalid for one field.
func InvalidField(field, message string) *Error {
	return Invalid(FieldError{Field: field, Message: message})
}

func unauthorized(detail string) *Error {
	return &Error{
		Status:  http.StatusUnauthorized,
		Detail:  detail,
		Headers: map[string]string{"WWW-Authenticate": `Bearer realm="mailwatch"`},
	}
}

// errorHandler turns every error that reaches Fiber into a JSON response
// with a detail (on the data API, PostgREST's shape with a message). Unknown errors are logged once, here, and answered with a
// generic 500 that reveals nothing.
func errorHandler(logger *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		var (
			apiErr   *Error
			fiberErr *fiber.Error
		)
		// Every error has this shape; only the DNS apply route documents
		// (and sets) record.
		body := RecordErrorBody{}
		status := http.StatusInternalServerError
		switch {
		case errors.As(err, &apiErr):
			status, body.Detail, body.Errors, body.Record = apiErr.Status, apiErr.Detail, apiErr.Fields, apiErr.Record
			for k, v := range apiErr.Headers {
				c.Set(k, v)
			}
			if status >= 500 && apiErr.Cause != nil {
				logger.ErrorContext(c.UserContext(), "request failed", slog.String("request_id", requestID(c)), slog.Any("error", apiErr.Cause))
			}
		case errors.As(err, &fiberErr):
			status = fiberErr.Code
			switch status {
			case http.StatusNotFound:
				body.Detail = fmt.Sprintf("no route for %s %s", c.Method(), c.Path())
			case http.StatusMethodNotAllowed:
				body.Detail = fmt.Sprintf("method %s is not allowed on %s", c.Method(), c.Path())
			case http.StatusRequestEntityTooLarge:
				body.Detail = "request body too large"
			default:
				body.Detail = http.StatusText(status)
				if status < 500 && fiberErr.Message != "" {
					body.Detail = fiberErr.Message
				}
			}
		case errors.Is(err, context.DeadlineExceeded):
			status = http.StatusServiceUnavailable
			body.Detail = "the request took too long and was abandoned; try again"
		default:
			logger.ErrorContext(c.UserContext(), "request failed", slog.String("request_id", requestID(c)), slog.Any("error", err))
			body.Detail = "internal server error"
		}
		if dataAPIRequest(c, status == http.StatusRequestHeaderFieldsTooLarge) { // edge.go
			return pgrstError(c, logger, &dataapi.Error{Status: status, Code: "PGRST000", Message: body.Detail}, nil)
		}
		return c.Status(status).JSON(body)
	}
}
