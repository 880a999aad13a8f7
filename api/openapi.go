package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go"
	"github.com/swaggest/openapi-go/openapi31"
)

const bearerScheme = "bearerAuth"

// jwtScheme documents the data API's JWT bearer tokens.
const jwtScheme = "jwtAuth"

func newReflector() *openapi31.Reflector {
	ref := openapi31.NewReflector()
	spec := ref.SpecEns()
	spec.Info.Title = "mailwatch API"
	spec.Info.Version = "1.0.0"
	desc := "Email-infrastructure monitoring: accounts and API keys, monitored domains, events and alerts, " +
		"event subscriptions with signed webhook delivery, and temporary receivers. Every error is JSON " +
		"with a `detail`; 422 responses add `errors` naming each invalid field. Routes that need a key are " +
		"limited to a fixed budget of requests per minute per key and carry X-RateLimit-* headers. Request " +
		"bodies are taken as sent, never decompressed: a body with a Content-Encoding other than identity is 415 " +
		"(with Accept-Encoding: identity) on every route that takes one."
	spec.Info.Description = &desc
	spec.SetHTTPBearerTokenSecurity(bearerScheme, "API key", "API key (mw_...) sent as `Authorization: Bearer <key>`.")
	spec.SetHTTPBearerTokenSecurity(jwtScheme, "JWT", "A data-API token from POST /api/auth/token (or a linked identity provider's JWT) sent as `Authorization: Bearer <jwt>`.")
	ref.DefaultOptions = append(ref.DefaultOptions,
		jsonschema.InterceptProp(applyValidateTag),
		jsonschema.InterceptDefName(func(_ reflect.Type, name string) string {
			if name == "UuidUUID" {
				return "UUID"
			}
			return strings.TrimPrefix(name, "Api")
		}),
	)
	return ref
}

// applyValidateTag turns go-playground validate tags into JSON Schema, so the
// constraints are written once and both enforced and documented.
func applyValidateTag(p jsonschema.InterceptPropParams) error {
	if !p.Processed {
		return nil
	}
	tag := p.Field.Tag.Get("validate")
	if tag == "" || p.PropertySchema == nil {
		return nil
	}
	s := p.PropertySchema
	t := p.Field.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, rule := range strings.Split(tag, ",") {
		name, param, _ := strings.Cut(rule, "=")
		if name == "dive" {
			break // rules after dive apply to elements
		}
		switch name {
		case "required":
			if p.ParentSchema != nil && p.Field.Tag.Get("json") != "" {
				p.ParentSchema.Required = appendUnique(p.ParentSchema.Required, p.Name)
			}
		case "min", "max", "gte", "lte":
			n, err := strconv.ParseFloat(param, 64)
			if err != nil {
				continue
			}
			switch t.Kind() {
			case reflect.String:
				i := int64(n)
				if name == "min" || name == "gte" {
					s.MinLength = i
				} else {
					s.MaxLength = &i
				}
			case reflect.Slice:
				i := int64(n)
				if name == "min" || name == "gte" {
					s.MinItems = i
				} else {
					s.MaxItems = &i
				}
			default:
				if name == "min" || name == "gte" {
					s.Minimum = &n
				} else {
					s.Maximum = &n
				}
			}
		case "oneof":
			for _, v := range strings.Fields(param) {
				s.Enum = append(s.Enum, v)
			}
		case "email":
			s.WithFormat("email")
		case "url", "http_url":
			s.WithFormat("uri")
		}
	}
	return nil
}

func appendUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// defaultErrors are the error statuses every route of an auth mode can
// answer.
func defaultErrors(auth AuthMode, hasInput bool) []int {
	var out []int
	switch auth {
	case AuthOps:
		return []int{http.StatusInternalServerError}
	case AuthNone, AuthIngress:
		out = []int{http.StatusTooManyRequests}
	default:
		out = []int{http.StatusUnauthorized, http.StatusTooManyRequests}
	}
	if auth == AuthAdmin {
		out = append(out, http.StatusNotFound)
	}
	if auth == AuthKey || auth == AuthAdmin {
		// A suspended account's keys (internal/accounts).
		out = append(out, http.StatusForbidden)
	}
	if hasInput {
		out = append(out, http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	return append(out, http.StatusInternalServerError, http.StatusServiceUnavailable)
}

type rateLimitHeaders struct {
	Limit     int64 `header:"X-RateLimit-Limit" description:"Requests allowed in the current window."`
	Remaining int64 `header:"X-RateLimit-Remaining" description:"Requests left in the current window."`
	Reset     int64 `header:"X-RateLimit-Reset" description:"When the window resets, in Unix seconds."`
}

type retryAfterHeaders struct {
	rateLimitHeaders
	RetryAfter int64 `header:"Retry-After" description:"Seconds to wait before retrying."`
}

func (r *Router) document(method, path string, status int, opID, summary, description, tag string, auth AuthMode,
	extraErrors []int, req, resp any, hasBody bool,
) {
	oc, err := r.reflector.NewOperationContext(method, path)
	if err != nil {
		panic(fmt.Sprintf("api: documenting %s %s: %v", method, path, err))
	}
	if opID != "" {
		oc.SetID(opID)
	}
	oc.SetSummary(summary)
	if description != "" {
		oc.SetDescription(description)
	}
	if tag != "" {
		oc.SetTags(tag)
	}
	switch auth {
	case AuthKey:
		oc.AddSecurity(bearerScheme)
	case AuthJWT:
		oc.AddSecurity(jwtScheme)
	case AuthAdmin:
		oc.AddSecurity(bearerScheme)
		oc.SetDescription(strings.TrimSpace(description + "\n\nAdmin only: the key must belong to an account granted admin " +
			"rights with `mailwatch admin grant <email>`. Any other key gets 404, as if the route did not exist."))
	}
	oc.AddReqStructure(req, func(cu *openapi.ContentUnit) {
		if !hasBody {
			cu.ContentType = ""
		}
	})

	limited := auth != AuthOps
	var okHeaders any
	if limited {
		okHeaders = new(rateLimitHeaders)
	}
	switch body := resp.(type) {
	case *NoContent:
		oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(http.StatusNoContent))
	case *RawBody:
		oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(status), openapi.WithContentType(r.rawContentType(method, path)))
	default:
		if d, ok := body.(interface{ OpenAPIBody() any }); ok {
			resp = d.OpenAPIBody()
		}
		oc.AddRespStructure(resp, openapi.WithHTTPStatus(status))
		if limited {
			oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(status))
		}
		if a, ok := body.(interface{ OpenAPIAlternatives() []int }); ok {
			for _, st := range a.OpenAPIAlternatives() {
				oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(st))
			}
		}
		if h, ok := body.(interface{ OpenAPIHeaders() any }); ok {
			oc.AddRespStructure(h.OpenAPIHeaders(), openapi.WithHTTPStatus(status))
		}
	}

	hasInput := hasBody || len(planRequest(reflect.TypeOf(req).Elem()).query) > 0 || len(planRequest(reflect.TypeOf(req).Elem()).path) > 0
	statuses := append(defaultErrors(auth, hasInput), extraErrors...)
	var errorBody any = new(ErrorBody)
	if e, ok := resp.(interface{ OpenAPIErrorBody() any }); ok {
		errorBody = e.OpenAPIErrorBody()
	}
	sort.Ints(statuses)
	seen := map[int]bool{}
	for _, st := range statuses {
		if seen[st] {
			continue
		}
		seen[st] = true
		oc.AddRespStructure(errorBody, openapi.WithHTTPStatus(st))
		if limited {
			if st == http.StatusTooManyRequests {
				oc.AddRespStructure(new(retryAfterHeaders), openapi.WithHTTPStatus(st))
			} else {
				oc.AddRespStructure(new(rateLimitHeaders), openapi.WithHTTPStatus(st))
			}
		}
	}
	if err := r.reflector.AddOperation(oc); err != nil {
		panic(fmt.Sprintf("api: documenting %s %s: %v", method, path, err))
	}
}

func (r *Router) rawContentType(method, path string) string {
	if ct, ok := r.rawTypes[method+" "+path]; ok {
		return ct
	}
	return "application/octet-stream"
}

// OpenAPI returns the document as JSON.
func (r *Router) OpenAPI() ([]byte, error) {
	b, err := json.Marshal(r.reflector.Spec)
	if err != nil {
		return nil, fmt.Errorf("error encoding OpenAPI document: %w", err)
	}
	return b, nil
}
