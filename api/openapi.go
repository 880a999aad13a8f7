package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
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
	// Paths are relative to wherever the API is served.
	spec.Servers = []openapi31.Server{{URL: "/"}}
	spec.SetHTTPBearerTokenSecurity(bearerScheme, "API key", "API key (mw_...) sent as `Authorization: Bearer <key>`.")
	spec.SetHTTPBearerTokenSecurity(jwtScheme, "JWT", "A data-API token from POST /api/auth/token (or a linked identity provider's JWT) sent as `Authorization: Bearer <jwt>`.")
	ref.DefaultOptions = append(ref.DefaultOptions,
		jsonschema.InterceptProp(interceptProp),
		jsonschema.InterceptSchema(interceptObject),
		jsonschema.InterceptDefName(func(_ reflect.Type, name string) string {
			if name == "UuidUUID" {
				return "UUID"
			}
			return strings.TrimPrefix(name, "Api")
		}),
	)
	return ref
}

// requestPart says which part of a request the reflector is describing:
// openapi.InBody, InQuery, InPath or InHeader; "" for a response (or a
// schema reflected outside an operation).
func requestPart(rc *jsonschema.ReflectContext) openapi.In {
	if rc == nil {
		return ""
	}
	oc, ok := openapi.OperationCtx(rc)
	if !ok || oc.IsProcessingResponse() {
		return ""
	}
	return oc.ProcessingIn()
}

// interceptProp writes what the server enforces of a request field into its
// schema: the validate tag (applyValidateTag), and no null where none can be
// sent (a query string, a path or a header has no JSON null).
func interceptProp(p jsonschema.InterceptPropParams) error {
	if !p.Processed || p.PropertySchema == nil {
		return nil
	}
	part := requestPart(p.Context)
	if part != "" && part != openapi.InBody {
		dropNull(p.PropertySchema)
	}
	return applyValidateTag(p, part != "")
}

// applyValidateTag turns go-playground validate tags into JSON Schema, so the
// constraints are written once and both enforced and documented. In a request
// (inRequest), `required` means what the validator makes of it: a string must
// not be empty and a pointer must not be null. Response structs use the tag
// only to list the properties always present, so there it adds nothing else.
func applyValidateTag(p jsonschema.InterceptPropParams, inRequest bool) error {
	tag := p.Field.Tag.Get("validate")
	if tag == "" {
		return nil
	}
	rules := strings.Split(tag, ",")
	head, items := rules, []string(nil)
	if i := slices.Index(rules, "dive"); i >= 0 {
		head, items = rules[:i], rules[i+1:]
	}
	if slices.Contains(head, "required") && p.ParentSchema != nil && p.Field.Tag.Get("json") != "" {
		p.ParentSchema.Required = appendUnique(p.ParentSchema.Required, p.Name)
	}
	if !inRequest {
		applyRules(p.PropertySchema, p.Field.Type, head, false)
		return nil
	}
	applyRules(p.PropertySchema, p.Field.Type, head, true)
	if len(items) > 0 {
		if it := itemsSchema(p.PropertySchema); it != nil {
			applyRules(it, elemType(p.Field.Type), items, true)
		}
	}
	return nil
}

// applyRules writes the rules of one value (a field, or the elements of a
// list after dive) into s. t is the value's Go type.
func applyRules(s *jsonschema.Schema, t reflect.Type, rules []string, inRequest bool) {
	pointer := t.Kind() == reflect.Pointer
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := t.Kind()
	// omitempty lets the zero value through: "" for a plain string, so a
	// minimum length would not be true of what is accepted. A pointer is
	// skipped only when nil. An OptionalString is skipped at "" too, but the
	// handlers of its fields refuse "" themselves.
	emptyAllowed := slices.Contains(rules, "omitempty") && !pointer && kind == reflect.String
	if custom := validatedKind(t); custom != reflect.Invalid {
		kind = custom
	}
	for _, rule := range rules {
		name, param, _ := strings.Cut(rule, "=")
		switch name {
		case "required":
			if !inRequest {
				continue
			}
			if kind == reflect.String && s.MinLength < 1 {
				s.MinLength = 1
			}
			if pointer {
				dropNull(s)
			}
		case "min", "max", "gte", "lte":
			n, err := strconv.ParseFloat(param, 64)
			if err != nil {
				continue
			}
			lower := name == "min" || name == "gte"
			switch kind {
			case reflect.String:
				i := int64(n)
				if lower {
					if !emptyAllowed {
						s.MinLength = i
					}
				} else {
					s.MaxLength = &i
				}
			case reflect.Slice, reflect.Array:
				i := int64(n)
				if lower {
					s.MinItems = i
				} else {
					s.MaxItems = &i
				}
			default:
				if lower {
					s.Minimum = &n
				} else {
					s.Maximum = &n
				}
			}
		case "oneof":
			// The list replaces any enum tag: one declaration, no value twice.
			s.Enum = nil
			for _, v := range strings.Fields(param) {
				if !slices.Contains(s.Enum, any(v)) {
					s.Enum = append(s.Enum, v)
				}
			}
		case "email":
			s.WithFormat("email")
		case "url", "http_url":
			s.WithFormat("uri")
		default:
			if r, ok := textRules[name]; ok {
				r.document(s)
			}
		}
	}
}

// itemsSchema is the schema of a list's elements, or nil.
func itemsSchema(s *jsonschema.Schema) *jsonschema.Schema {
	if s.Items == nil || s.Items.SchemaOrBool == nil {
		return nil
	}
	return s.Items.SchemaOrBool.TypeObject
}

// elemType is the element type of a list (through pointers and the list
// types of this package that the validator sees as their elements).
func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		return t.Elem()
	}
	if t == reflect.TypeFor[OptionalStrings]() {
		return reflect.TypeFor[string]()
	}
	return t
}

// validatedKind is the kind the validator sees for the types of this
// package it validates as their value (newValidator), or Invalid.
func validatedKind(t reflect.Type) reflect.Kind {
	switch t {
	case reflect.TypeFor[OptionalString]():
		return reflect.String
	case reflect.TypeFor[OptionalStrings]():
		return reflect.Slice
	case reflect.TypeFor[OptionalInt]():
		return reflect.Int32
	}
	return reflect.Invalid
}

// dropNull removes null from the schema's types.
func dropNull(s *jsonschema.Schema) {
	if s.Type == nil {
		return
	}
	if s.Type.SimpleTypes != nil {
		if *s.Type.SimpleTypes == jsonschema.Null {
			s.Type = nil
		}
		return
	}
	kept := slices.DeleteFunc(slices.Clone(s.Type.SliceOfSimpleTypeValues), func(t jsonschema.SimpleType) bool { return t == jsonschema.Null })
	switch len(kept) {
	case 0:
		s.Type = nil
	case 1:
		s.Type = &jsonschema.Type{SimpleTypes: &kept[0]}
	default:
		s.Type.SliceOfSimpleTypeValues = kept
	}
}

// interceptObject describes the objects of a request body as the decoder
// reads them: an unknown member is refused (additionalProperties: false), and
// a body marked atLeastOne must give one of its fields (anyOf).
func interceptObject(p jsonschema.InterceptSchemaParams) (bool, error) {
	if !p.Processed || requestPart(p.Context) != openapi.InBody || !p.Value.IsValid() {
		return false, nil
	}
	t := p.Value.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || !p.Schema.HasType(jsonschema.Object) {
		return false, nil
	}
	closed := false
	p.Schema.AdditionalProperties = &jsonschema.SchemaOrBool{TypeBoolean: &closed}
	for _, f := range oneOfFields(t) {
		alt := jsonschema.Schema{Required: []string{f.name}}
		if f.nullIsAbsent {
			// A null member decodes as if it were absent: it does not count.
			var null jsonschema.Schema
			null.AddType(jsonschema.Null)
			alt.WithPropertiesItem(f.name, (&jsonschema.Schema{Not: &jsonschema.SchemaOrBool{TypeObject: &null}}).ToSchemaOrBool())
		}
		p.Schema.AnyOf = append(p.Schema.AnyOf, alt.ToSchemaOrBool())
	}
	return false, nil
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
	extraErrors []int, req, resp any, hasBody bool, bodyTypes []string,
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
		for _, st := range r.alsoStatuses[method+" "+path] {
			oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(st), openapi.WithContentType(r.rawContentType(method, path)))
		}
	default:
		if d, ok := body.(interface{ OpenAPIBody() any }); ok {
			resp = d.OpenAPIBody()
		}
		for _, st := range append([]int{status}, r.alsoStatuses[method+" "+path]...) {
			oc.AddRespStructure(resp, openapi.WithHTTPStatus(st))
			if limited {
				oc.AddRespStructure(okHeaders, openapi.WithHTTPStatus(st))
			}
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

	hasInput := hasBody || len(bodyTypes) > 0 || len(planRequest(reflect.TypeOf(req).Elem()).query) > 0 || len(planRequest(reflect.TypeOf(req).Elem()).path) > 0
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
	r.finishOperation(r.operation(method, path), auth, reflect.TypeOf(req).Elem(), bodyTypes)
}

// operation is the documented operation of a route.
func (r *Router) operation(method, path string) *openapi31.Operation {
	op, err := r.reflector.Spec.Paths.MapOfPathItemValues[path].Operation(method)
	if err != nil || op == nil {
		panic(fmt.Sprintf("api: %s %s is not documented", method, path))
	}
	return op
}

// finishOperation writes what the reflector leaves out: who may call the
// route, which query parameters the server requires, whether the body is
// required, and the media types of a raw body.
func (r *Router) finishOperation(op *openapi31.Operation, auth AuthMode, reqType reflect.Type, bodyTypes []string) {
	if auth == AuthNone || auth == AuthIngress || auth == AuthOps {
		// No credentials: said explicitly, so that no client sends any.
		if op.MapOfAnything == nil {
			op.MapOfAnything = map[string]any{}
		}
		op.MapOfAnything["security"] = []any{}
	}
	required := map[string]bool{}
	for _, f := range reflect.VisibleFields(reqType) {
		rules, _, _ := strings.Cut(f.Tag.Get("validate"), ",dive")
		if !slices.Contains(strings.Split(rules, ","), "required") {
			continue
		}
		for _, in := range []string{"query", "header"} {
			if name := f.Tag.Get(in); name != "" {
				required[in+" "+name] = true
			}
		}
	}
	for _, p := range op.Parameters {
		if p.Parameter != nil && required[string(p.Parameter.In)+" "+p.Parameter.Name] {
			p.Parameter.WithRequired(true)
		}
	}
	if len(bodyTypes) > 0 {
		body := op.RequestBodyEns().RequestBodyEns()
		for _, ct := range bodyTypes {
			// The bytes are the sender's document (a provider's event, a
			// report, a message): no schema of ours describes them.
			body.WithContentItem(ct, openapi31.MediaType{})
		}
		body.WithRequired(true)
		return
	}
	if op.RequestBody == nil || op.RequestBody.RequestBody == nil {
		return
	}
	// A body with a required member, or one of whose members must be
	// given, cannot be left out: the decoder reads no body as {}.
	for _, mt := range op.RequestBody.RequestBody.Content {
		schema := r.resolve(mt.Schema)
		if req, _ := schema["required"].([]any); len(req) > 0 || schema["anyOf"] != nil {
			op.RequestBody.RequestBody.WithRequired(true)
		}
	}
}

// resolve follows a reference to the document's components.
func (r *Router) resolve(schema map[string]any) map[string]any {
	if ref, ok := schema["$ref"].(string); ok {
		return r.reflector.Spec.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	}
	return schema
}

// bodyNullRule is where the documented JSON body of a route may hold null.
func (r *Router) bodyNullRule(method, path string) *nullRule {
	op := r.operation(method, path)
	if op.RequestBody == nil || op.RequestBody.RequestBody == nil {
		return nil
	}
	mt, ok := op.RequestBody.RequestBody.Content["application/json"]
	if !ok {
		return nil
	}
	return nullRuleOf(mt.Schema, r.reflector.Spec.Components.Schemas, nil)
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
