package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// AuthMode says who may call an endpoint.
type AuthMode int

const (
	// AuthKey requires a valid API key (the default).
	AuthKey AuthMode = iota
	// AuthNone is a public route, limited per client IP.
	AuthNone
	// AuthAdmin requires a key of an admin account; others get 404.
	AuthAdmin
	// AuthOps is an unauthenticated, unlimited operational route.
	AuthOps
	// AuthIngress is a provider's webhook: no API key (the request is
	// signed), limited per client IP with its own, higher budget.
	AuthIngress
	// AuthJWT is a data-API route: the handler verifies a JWT (not an API
	// key) and charges the token subject's budget itself.
	AuthJWT
)

// Endpoint describes one route: its contract for OpenAPI and the function
// that serves it.
type Endpoint[Req, Resp any] struct {
	Method      string
	Path        string // OpenAPI syntax: /api/things/{id}
	Status      int    // success status; 200 when zero
	OperationID string
	Summary     string
	Description string
	Tag         string
	Auth        AuthMode
	// Errors lists the error statuses this route can answer beyond those
	// every route of its auth mode can (400/401/404/413/422/429/500/503).
	Errors []int
	// BodyTypes are the media types of a raw request body (HandleRaw routes
	// that read bytes, not a JSON object), for the document.
	BodyTypes []string
	// Timeout overrides the per-request deadline (long polls).
	Timeout func(req *Req) time.Duration
	Call    func(ctx context.Context, req *Req) (*Resp, error)
}

// StatusCoder lets a response choose its status (e.g. 200 or 204).
type StatusCoder interface{ HTTPStatus() int }

// HeaderSetter lets a response add headers (pagination cursors).
type HeaderSetter interface{ ResponseHeaders() map[string]string }

// BodyProvider lets a response choose what is encoded as its JSON body
// (a page encodes its items). It saves the second pass encoding/json makes
// over a MarshalJSON result.
type BodyProvider interface{ ResponseBody() any }

// RawBody is a non-JSON response body.
type RawBody struct {
	ContentType string
	Body        []byte
	// Headers are added to the response (Content-Disposition, ...).
	Headers map[string]string
}

// NoContent is an empty 204 response.
type NoContent struct{}

// HTTPStatus implements StatusCoder.
func (NoContent) HTTPStatus() int { return http.StatusNoContent }

// Handle registers ep on the router and records it in the OpenAPI document.
// It returns the operation, for the dashboard to call (operation.go).
func Handle[Req, Resp any](r *Router, ep Endpoint[Req, Resp]) Operation[Req, Resp] {
	if ep.Status == 0 {
		ep.Status = http.StatusOK
	}
	plan := planRequest(reflect.TypeFor[Req]())
	r.document(ep.Method, ep.Path, ep.Status, ep.OperationID, ep.Summary, ep.Description, ep.Tag, ep.Auth, ep.Errors,
		new(Req), new(Resp), plan.hasBody, nil)
	if plan.hasBody {
		plan.nulls = r.bodyNullRule(ep.Method, ep.Path)
	}

	op := Operation[Req, Resp]{r: r, ep: &ep}
	handler := func(c *fiber.Ctx) error {
		req := new(Req)
		if err := plan.decode(c, req); err != nil {
			return err
		}
		resp, err := op.run(c.UserContext(), req)
		if err != nil {
			return err
		}
		return writeResponse(c, ep.Status, resp)
	}
	r.add(ep.Method, ep.Path, ep.Auth, ep.Timeout != nil, handler)
	return op
}

// HandleRaw registers a route served by a plain Fiber handler (raw bodies,
// signatures over exact bytes, non-JSON responses). Req and Resp only
// document it; ep.Call is not used.
func HandleRaw[Req, Resp any](r *Router, ep Endpoint[Req, Resp], h fiber.Handler) {
	if ep.Status == 0 {
		ep.Status = http.StatusOK
	}
	plan := planRequest(reflect.TypeFor[Req]())
	r.document(ep.Method, ep.Path, ep.Status, ep.OperationID, ep.Summary, ep.Description, ep.Tag, ep.Auth, ep.Errors,
		new(Req), new(Resp), plan.hasBody, ep.BodyTypes)
	r.add(ep.Method, ep.Path, ep.Auth, false, h)
}

func writeResponse(c *fiber.Ctx, status int, resp any) error {
	if hs, ok := resp.(HeaderSetter); ok {
		for k, v := range hs.ResponseHeaders() {
			if v != "" {
				c.Set(k, v)
			}
		}
	}
	if sc, ok := resp.(StatusCoder); ok {
		status = sc.HTTPStatus()
	}
	if status == http.StatusNoContent {
		return c.SendStatus(status)
	}
	if raw, ok := resp.(*RawBody); ok {
		c.Set(fiber.HeaderContentType, raw.ContentType)
		for k, v := range raw.Headers {
			c.Set(k, v)
		}
		return c.Status(status).Send(raw.Body)
	}
	if a, ok := resp.(JSONAppender); ok {
		size := 8192
		if s, ok := a.(jsonSizer); ok {
			if n := s.jsonSize(); n > 0 {
				size = n + 1 // room for the newline: no copy to add it
			}
		}
		body, err := a.AppendJSON(make([]byte, 0, size))
		if err != nil {
			return err
		}
		body = append(body, '\n') // each item was tidied as it was appended (jsonappend.go)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(status).Send(body)
	}
	if bp, ok := resp.(BodyProvider); ok {
		return c.Status(status).JSON(bp.ResponseBody())
	}
	return c.Status(status).JSON(resp)
}

// requestPlan is the reflected shape of a request struct: which fields come
// from the path, the query string and the JSON body.
type requestPlan struct {
	path    []fieldRef
	query   []fieldRef
	hasBody bool
	// nulls says where the body may hold a JSON null: the document's own
	// schema of it (Handle reads it back once the route is documented).
	nulls *nullRule
}

// atLeastOne, as the type of a blank field (`_ atLeastOne`), marks a request
// body that must give at least one of its fields: the router's validation
// refuses one that gives none (checkAtLeastOne), and the document says so
// with an anyOf (interceptObject). A field given as null counts as absent
// when null decodes to its zero value (a plain pointer); a field whose null
// means something (OptionalString: clear it) counts.
type atLeastOne struct{}

// bodyField is one JSON field of an atLeastOne body.
type bodyField struct {
	index        []int
	name         string
	nullIsAbsent bool
}

var oneOfCache sync.Map // reflect.Type -> []bodyField

// oneOfFields lists the JSON fields of t when t is marked atLeastOne.
func oneOfFields(t reflect.Type) []bodyField {
	if v, ok := oneOfCache.Load(t); ok {
		return v.([]bodyField)
	}
	var out []bodyField
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Name != "_" || f.Type != reflect.TypeFor[atLeastOne]() {
			continue
		}
		for _, f := range reflect.VisibleFields(t) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || f.Anonymous || name == "" || name == "-" {
				continue
			}
			switch f.Type.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Struct:
			default:
				// Its zero value is a value a client can send ("", 0,
				// false): giving it could not be told from leaving it out.
				panic("api: " + t.String() + "." + f.Name + " of an atLeastOne body must be a pointer, list, map or struct")
			}
			v := reflect.New(f.Type)
			nullIsAbsent := json.Unmarshal([]byte("null"), v.Interface()) == nil && v.Elem().IsZero()
			out = append(out, bodyField{index: f.Index, name: name, nullIsAbsent: nullIsAbsent})
		}
		break
	}
	oneOfCache.Store(t, out)
	return out
}

// checkAtLeastOne refuses an atLeastOne body that gives none of its fields.
func checkAtLeastOne(req any) error {
	v := reflect.ValueOf(req)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	fields := oneOfFields(v.Type())
	if len(fields) == 0 {
		return nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		if !v.FieldByIndex(f.index).IsZero() {
			return nil
		}
		names[i] = f.name
	}
	return InvalidField(names[0], "give at least one of "+strings.Join(names, ", "))
}

type fieldRef struct {
	index []int
	name  string
	typ   reflect.Type
}

func planRequest(t reflect.Type) requestPlan {
	var p requestPlan
	if t.Kind() != reflect.Struct {
		panic("api: request type must be a struct: " + t.String())
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Tag.Get("path") != "":
			p.path = append(p.path, fieldRef{f.Index, f.Tag.Get("path"), f.Type})
		case f.Tag.Get("query") != "":
			p.query = append(p.query, fieldRef{f.Index, f.Tag.Get("query"), f.Type})
		case f.Tag.Get("json") != "" && f.Tag.Get("json") != "-":
			p.hasBody = true
		}
	}
	return p
}

func (p requestPlan) decode(c *fiber.Ctx, req any) error {
	v := reflect.ValueOf(req).Elem()
	for _, f := range p.path {
		// Fiber reuses its buffers: copy the value out.
		raw := strings.Clone(c.Params(f.name))
		if err := setScalar(v.FieldByIndex(f.index), raw); err != nil {
			// A malformed identifier can never name an existing resource.
			return &Error{Status: http.StatusNotFound, Detail: fmt.Sprintf("%s not found", strings.ReplaceAll(f.name, "_", " "))}
		}
	}
	for _, f := range p.query {
		if f.typ == reflect.TypeFor[[]string]() {
			// A repeatable parameter: every value, in order.
			var list []string
			for _, raw := range c.Context().QueryArgs().PeekMulti(f.name) {
				list = append(list, string(raw))
			}
			v.FieldByIndex(f.index).Set(reflect.ValueOf(list))
			continue
		}
		raw := c.Context().QueryArgs().Peek(f.name)
		if raw == nil {
			continue
		}
		if err := setScalar(v.FieldByIndex(f.index), string(raw)); err != nil {
			return BadRequest("query parameter %s: %v", f.name, err)
		}
	}
	if p.hasBody {
		body := c.Body()
		if len(bytes.TrimSpace(body)) == 0 {
			return nil // required fields then fail validation with 422
		}
		if ct := string(c.Request().Header.ContentType()); ct != "" {
			// A missing type is taken as JSON; any other must be exactly it.
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				return &Error{Status: http.StatusUnsupportedMediaType, Detail: "request body must be application/json"}
			}
		}
		if err := decodeJSON(body, req); err != nil {
			return err
		}
		if err := p.nulls.check(body); err != nil {
			return err
		}
	}
	return nil
}

// decodeJSON decodes a request body, which must be one JSON object, into
// dst, refusing unknown fields.
func decodeJSON(body []byte, dst any) error {
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] != '{' {
		// null would decode as no body at all, and a list or a scalar
		// as a type error naming no field: say what is wrong once.
		return BadRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var (
			syntaxErr *json.SyntaxError
			typeErr   *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syntaxErr):
			return BadRequest("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
		case errors.As(err, &typeErr):
			field := typeErr.Field
			if field == "" {
				return BadRequest("request body must be a JSON object")
			}
			return BadRequest("field %s must be %s, not %s", field, jsonKind(typeErr.Type), typeErr.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return BadRequest("malformed JSON: unexpected end of input")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return InvalidField(name, "unknown field")
		default:
			return BadRequest("malformed JSON: %v", err)
		}
	}
	if dec.More() {
		return BadRequest("malformed JSON: unexpected data after the object")
	}
	return nil
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
