package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// TestOpenAPIAgreement holds the server to its own document. For every
// operation of GET /openapi.json it builds requests from the operation's
// schemas alone: a minimal valid request (required members generated from
// their schemas, or the schema's example), then one request per boundary the
// schema draws: each required member or parameter missing, a wrong type, null
// where null is not allowed, "" under minLength, a value past each bound, a
// value outside an enum or a pattern, an unknown member where
// additionalProperties is false, a body that gives none of an anyOf, and a
// body that is not an object. The server must answer 2xx to the valid request
// and 4xx to every other, never 5xx; every answer is also checked against the
// documented responses (checkConformance). Path parameters name real
// resources the test makes first (agreementFixtures); where no real resource
// can make the valid request succeed, the fixture says why, and only the 2xx
// is not asked of it.
func TestOpenAPIAgreement(t *testing.T) {
	t.Parallel()
	e := newAgreementEnv(t)
	doc := e.document(t)
	ops := doc.operations()
	require.Greater(t, len(ops), 100)

	var requests, valid int
	var noSuccess []string
	for _, op := range ops {
		t.Run(op.id, func(t *testing.T) {
			fixture, listed := agreementFixtures[op.id]
			require.True(t, listed, "%s %s has no entry in agreementFixtures: say what it needs", op.method, op.path)
			prepare := func() *agreementState {
				st := &agreementState{acct: e.account(t), params: map[string]string{}, query: map[string]string{}, body: map[string]any{}}
				if fixture != nil {
					fixture(t, e, st)
				}
				return st
			}
			run := func(st *agreementState, c agreementCase) {
				requests++
				if c.valid {
					valid++
					if st.before != nil {
						st.before()
					}
				}
				e.check(t, op, st, c)
			}
			st := prepare()
			if st.noSuccess != "" {
				noSuccess = append(noSuccess, op.id+": "+st.noSuccess)
			}
			again := false
			for _, c := range doc.cases(t, op, st) {
				if c.name == validWithoutBody {
					again = true
					continue
				}
				run(st, c)
			}
			if again {
				// A second valid request, on resources of its own: the
				// first may have changed what it would act on.
				st = prepare()
				for _, c := range doc.cases(t, op, st) {
					if c.name == validWithoutBody {
						run(st, c)
					}
				}
			}
		})
	}
	t.Logf("%d operations, %d requests (%d valid); no 2xx asked of %d:\n%s", len(ops), requests, valid, len(noSuccess), strings.Join(noSuccess, "\n"))
}

// agreementEnv is one API server with what its routes reach: a DNS server
// on loopback for the live lookups, a Cloudflare API and a webhook endpoint
// on loopback, and a clock the test can move.
type agreementEnv struct {
	b      *testBundle
	dns    *dnstest.Server
	hook   *httptest.Server
	offset atomic.Int64
	seq    atomic.Int64
}

func newAgreementEnv(t *testing.T) *agreementEnv {
	t.Helper()
	e := &agreementEnv{}
	e.dns = dnstest.Start(t, `
example.com. IN TXT "v=spf1 -all"
example.com. IN MX 10 mx.example.com.
_dmarc.example.com. IN TXT "v=DMARC1; p=none"
`)
	// Cloudflare's API as far as a connection reaches it: the token check,
	// the zone of example.com and its (empty) record sets.
	cf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var result any = map[string]any{"id": "ed17574386854bf78a67040be0a770b0", "status": "active"}
		switch path := strings.TrimPrefix(r.URL.Path, "/client/v4"); {
		case path == "/zones":
			result = []any{map[string]any{"id": "023e105f4ecef8ad9ca31a8372d0c353", "name": "example.com", "status": "active"}}
		case strings.HasSuffix(path, "/dns_records"):
			result = []any{}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": result,
			"result_info": map[string]any{"page": 1, "per_page": 100, "total_pages": 1}})
	}))
	t.Cleanup(cf.Close)
	e.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(e.hook.Close)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	// The server's log is shown when the test fails: a 5xx's cause is there.
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	e.b = setup(t, func(o *setupOpts) {
		o.now = func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }
		o.deps = func(d *api.Deps) {
			d.Resolver = dnscheck.NewClient(e.dns.Addr(), 500*time.Millisecond)
			d.SMTPProbe = true
			d.StripeWebhookSecret = testStripeSecret
			// Notification channels send to the loopback hook only.
			d.ChannelHosts, _ = channels.ParseAllowedHosts(strings.TrimPrefix(e.hook.URL, "http://"))
			d.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			d.DNSFix = &domains.FixDeps{
				Env: &dnsfix.Env{Keyring: keyring, Guard: testGuard(t), CloudflareURL: cf.URL + "/client/v4"},
				MX:  dnsfix.MXConfig{Host: "mx.mailwatch.test"},
			}
		}
	})
	return e
}

// account is a fresh admin account: each operation starts from its own, so
// that no operation sees what another made or deleted.
func (e *agreementEnv) account(t *testing.T) account {
	t.Helper()
	a := e.b.createAccount(t)
	e.b.makeAdmin(t, a)
	return a
}

// document is GET /openapi.json, decoded.
func (e *agreementEnv) document(t *testing.T) *agreementDoc {
	t.Helper()
	resp := e.b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var d agreementDoc
	resp.JSON(t, &d.root)
	d.schemas, _ = d.root["components"].(map[string]any)["schemas"].(map[string]any)
	require.NotEmpty(t, d.schemas)
	return &d
}

// agreementState is what a fixture prepares for one operation: the values
// that must name real resources, and why no 2xx can be asked when none can
// be made.
type agreementState struct {
	acct   account
	params map[string]string // path parameters
	query  map[string]string // query parameters naming real things
	body   map[string]any    // body members naming real things
	bearer string            // a JWT for jwtAuth operations
	// noSuccess, when set, says why the valid request cannot succeed here.
	noSuccess string
	// before runs just before the valid request.
	before func()
}

// validWithoutBody names the request that leaves an optional body out.
const validWithoutBody = "valid without a body"

// agreementCase is one request and the schema's verdict on it.
type agreementCase struct {
	name        string
	target      string // path and query
	contentType string
	body        []byte // nil: no body
	valid       bool
}

func (e *agreementEnv) check(t *testing.T, op agreementOp, st *agreementState, c agreementCase) {
	t.Helper()
	req := httptest.NewRequest(op.method, c.target, bytes.NewReader(c.body))
	if c.body == nil {
		req = httptest.NewRequest(op.method, c.target, nil)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	// The account's key goes with every request (public routes ignore it;
	// the token route exchanges it), a JWT to the data API.
	key := st.acct.Key
	if op.security == "jwtAuth" {
		key = st.bearer
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := e.b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	what := fmt.Sprintf("%s %s (%s) body %s", op.method, c.target, c.name, truncate(c.body))
	require.Less(t, out.Status, 500, "%s: answered %d %s", what, out.Status, got)
	switch {
	case !c.valid:
		require.True(t, out.Status >= 400, "%s is invalid by the document but answered %d %s", what, out.Status, got)
	case st.noSuccess == "":
		require.True(t, out.Status < 300, "%s is valid by the document but answered %d %s", what, out.Status, got)
	}
	checkConformanceAs(t, e.b.srv, op.method, c.target, key, c.contentType, c.body, out)
}

func truncate(b []byte) string {
	if b == nil {
		return "(none)"
	}
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// agreementDoc is the OpenAPI document as JSON values.
type agreementDoc struct {
	root    map[string]any
	schemas map[string]any
}

type agreementOp struct {
	id, method, path string
	op               map[string]any
	// security is the operation's scheme: "bearerAuth", "jwtAuth" or "none".
	security string
}

func (d *agreementDoc) operations() []agreementOp {
	var out []agreementOp
	for path, item := range d.root["paths"].(map[string]any) {
		for method, raw := range item.(map[string]any) {
			op, ok := raw.(map[string]any)
			if !ok {
				continue
			}
			o := agreementOp{id: op["operationId"].(string), method: strings.ToUpper(method), path: path, op: op, security: "none"}
			if sec, _ := op["security"].([]any); len(sec) > 0 {
				for name := range sec[0].(map[string]any) {
					o.security = name
				}
			}
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// resolve follows a $ref; sibling keywords of the reference (3.1 allows
// them) apply on top of the target's.
func (d *agreementDoc) resolve(s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	target := d.resolve(d.schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any))
	out := map[string]any{}
	for k, v := range target {
		out[k] = v
	}
	for k, v := range s {
		if k != "$ref" {
			out[k] = v
		}
	}
	return out
}

func types(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			out = append(out, v.(string))
		}
		return out
	}
	return nil
}

func mainType(s map[string]any) string {
	for _, t := range types(s) {
		if t != "null" {
			return t
		}
	}
	return ""
}

func required(s map[string]any) []string {
	var out []string
	list, _ := s["required"].([]any)
	for _, r := range list {
		out = append(out, r.(string))
	}
	return out
}

func number(s map[string]any, key string) (float64, bool) {
	v, ok := s[key].(float64)
	return v, ok
}

// value is a minimal valid value of schema s: its example, the first of its
// enum, or what its type and bounds allow. where names it in failures.
func (d *agreementDoc) value(t *testing.T, s map[string]any, where string) any {
	t.Helper()
	s = d.resolve(s)
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch mainType(s) {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		names := required(s)
		if alts, ok := s["anyOf"].([]any); ok && len(alts) > 0 {
			names = append(names, required(alts[0].(map[string]any))...)
		}
		for _, name := range names {
			if _, done := obj[name]; !done {
				ps, ok := props[name].(map[string]any)
				require.True(t, ok, "%s: required %s has no schema", where, name)
				obj[name] = d.value(t, ps, where+"."+name)
			}
		}
		return obj
	case "array":
		n, _ := number(s, "minItems")
		items, _ := s["items"].(map[string]any)
		out := []any{}
		for i := 0; i < int(n); i++ {
			out = append(out, d.value(t, items, fmt.Sprintf("%s[%d]", where, i)))
		}
		return out
	case "integer", "number":
		if min, ok := number(s, "minimum"); ok {
			return min
		}
		if max, ok := number(s, "maximum"); ok && max < 1 {
			return max
		}
		return 1
	case "boolean":
		return true
	case "string":
		n, _ := number(s, "minLength")
		plain := strings.Repeat("x", max(int(n), 1))
		if p, patterned := s["pattern"].(string); patterned {
			require.True(t, regexp.MustCompile(p).MatchString(plain), "%s has a pattern but no example: a valid value cannot be told from it", where)
		}
		switch s["format"] {
		case "date-time":
			return time.Now().UTC().Format(time.RFC3339)
		case "date":
			return time.Now().UTC().Format(time.DateOnly)
		case "uuid":
			return uuid.NewString()
		}
		return plain
	case "":
		return map[string]any{}
	}
	t.Fatalf("%s: no value for type %v", where, s["type"])
	return nil
}

// generable: value can make a value of s from s alone (a pattern needs an
// example).
func (d *agreementDoc) generable(s map[string]any) bool {
	s = d.resolve(s)
	_, example := s["examples"]
	p, patterned := s["pattern"].(string)
	return example || !patterned || regexp.MustCompile(p).MatchString("x")
}

// invalid is a value the schema refuses, and what is wrong with it.
type invalid struct {
	what  string
	value any
}

// invalidValues are the values of schema s's boundaries: each one the
// schema refuses for one reason.
func (d *agreementDoc) invalidValues(t *testing.T, s map[string]any, where string) []invalid {
	s = d.resolve(s)
	ts := types(s)
	var out []invalid
	if len(ts) > 0 {
		for _, wrong := range []struct {
			types []string
			value any
		}{{[]string{"string"}, 12345}, {[]string{"integer", "number"}, "x"}, {[]string{"boolean"}, "x"}, {[]string{"array"}, "x"}, {[]string{"object"}, "x"}} {
			if slices.Contains(wrong.types, mainType(s)) {
				out = append(out, invalid{"wrong type", wrong.value})
				break
			}
		}
		if !slices.Contains(ts, "null") {
			out = append(out, invalid{"null", nil})
		}
	}
	if enum, ok := s["enum"].([]any); ok && mainType(s) == "string" && !slices.Contains(enum, any("not-a-listed-value")) {
		out = append(out, invalid{"outside the enum", "not-a-listed-value"})
	}
	switch mainType(s) {
	case "string":
		if n, ok := number(s, "minLength"); ok && n >= 1 {
			out = append(out, invalid{"shorter than minLength", strings.Repeat("x", int(n)-1)})
		}
		if n, ok := number(s, "maxLength"); ok {
			out = append(out, invalid{"longer than maxLength", strings.Repeat("x", int(n)+1)})
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString("not valid") {
			out = append(out, invalid{"outside the pattern", "not valid"})
		}
		switch s["format"] {
		case "date-time":
			out = append(out, invalid{"not a date-time", "yesterday"})
		case "uuid":
			out = append(out, invalid{"not a uuid", "not-a-uuid"})
		}
	case "integer", "number":
		if min, ok := number(s, "minimum"); ok {
			out = append(out, invalid{"below minimum", min - 1})
		}
		if max, ok := number(s, "maximum"); ok {
			out = append(out, invalid{"above maximum", max + 1})
		}
		if mainType(s) == "integer" {
			out = append(out, invalid{"not an integer", 1.5})
		}
	case "array":
		items, _ := s["items"].(map[string]any)
		if n, ok := number(s, "minItems"); ok && n >= 1 {
			out = append(out, invalid{"fewer than minItems", []any{}})
		}
		if n, ok := number(s, "maxItems"); ok && items != nil && d.generable(items) {
			list := make([]any, int(n)+1)
			for i := range list {
				list[i] = d.value(t, items, where+"[]")
			}
			out = append(out, invalid{"more than maxItems", list})
		}
		if items != nil {
			for _, iv := range d.invalidValues(t, items, where+"[]") {
				out = append(out, invalid{"an item " + iv.what, []any{iv.value}})
			}
		}
	}
	return out
}

// cases are the requests of one operation, the valid ones last.
func (d *agreementDoc) cases(t *testing.T, op agreementOp, st *agreementState) []agreementCase {
	t.Helper()
	type param struct {
		name, in string
		required bool
		schema   map[string]any
	}
	var params []param
	list, _ := op.op["parameters"].([]any)
	for _, raw := range list {
		p := raw.(map[string]any)
		req, _ := p["required"].(bool)
		params = append(params, param{p["name"].(string), p["in"].(string), req, p["schema"].(map[string]any)})
	}
	pathValues := map[string]string{}
	query := url.Values{}
	for _, p := range params {
		switch p.in {
		case "path":
			v, ok := st.params[p.name]
			if _, listed := d.resolve(p.schema)["enum"]; !ok && listed {
				v, ok = fmt.Sprint(d.value(t, p.schema, op.id+" "+p.name)), true
			}
			require.True(t, ok, "the fixture of %s gives no value for path parameter %s", op.id, p.name)
			pathValues[p.name] = v
		case "query":
			if v, ok := st.query[p.name]; ok {
				query.Set(p.name, v)
			} else if p.required {
				query.Set(p.name, queryText(d.value(t, p.schema, op.id+" "+p.name)))
			}
		}
	}
	target := func(path map[string]string, q url.Values) string {
		s := op.path
		for name, v := range path {
			s = strings.ReplaceAll(s, "{"+name+"}", url.PathEscape(v))
		}
		if enc := q.Encode(); enc != "" {
			s += "?" + enc
		}
		return s
	}
	base := target(pathValues, query)

	// The body: JSON (its schema), or raw bytes of a documented media type.
	var (
		bodySchema   map[string]any
		rawType      string
		bodyRequired bool
	)
	if rb, ok := op.op["requestBody"].(map[string]any); ok {
		bodyRequired, _ = rb["required"].(bool)
		content := rb["content"].(map[string]any)
		if mt, ok := content["application/json"].(map[string]any); ok && mt["schema"] != nil {
			bodySchema = d.resolve(mt["schema"].(map[string]any))
		} else {
			var names []string
			for ct := range content {
				names = append(names, ct)
			}
			sort.Strings(names)
			rawType = names[0]
		}
	}

	var out []agreementCase
	add := func(name, tgt string, body any, valid bool) {
		c := agreementCase{name: name, target: tgt, valid: valid}
		switch v := body.(type) {
		case nil:
		case []byte:
			c.body, c.contentType = v, rawType
		default:
			raw, err := json.Marshal(v)
			require.NoError(t, err)
			c.body, c.contentType = raw, "application/json"
		}
		out = append(out, c)
	}

	var validBody any
	switch {
	case bodySchema != nil:
		obj := d.value(t, bodySchema, op.id+" body").(map[string]any)
		for k, v := range st.body {
			obj[k] = v
		}
		validBody = obj
	case rawType != "":
		validBody = []byte("x")
		if strings.HasSuffix(rawType, "json") {
			validBody = []byte("{}")
		}
	}

	// Parameters.
	for _, p := range params {
		switch p.in {
		case "path":
			for _, iv := range d.invalidValues(t, p.schema, op.id+" "+p.name) {
				if iv.value == nil || iv.what == "wrong type" {
					continue // a path segment is text: only its content can be wrong
				}
				bad := map[string]string{}
				for k, v := range pathValues {
					bad[k] = v
				}
				bad[p.name] = fmt.Sprint(iv.value)
				add("path "+p.name+" "+iv.what, target(bad, query), validBody, false)
			}
		case "query":
			if p.required {
				q := cloneValues(query)
				q.Del(p.name)
				add("query "+p.name+" missing", target(pathValues, q), validBody, false)
			}
			for _, iv := range d.invalidValues(t, p.schema, op.id+" "+p.name) {
				if iv.value == nil || (iv.what == "wrong type" && mainType(d.resolve(p.schema)) == "string") {
					continue // a query string has no null, and any text is a string
				}
				if _, isList := iv.value.([]any); isList {
					continue
				}
				q := cloneValues(query)
				q.Set(p.name, queryText(iv.value))
				add("query "+p.name+" "+iv.what, target(pathValues, q), validBody, false)
			}
		}
	}

	// The body.
	if bodySchema != nil || rawType != "" {
		if bodyRequired {
			add("no body", base, nil, false)
		}
	}
	if rawType != "" {
		add("a body of "+rawType, base, validBody, true)
		return out
	}
	if bodySchema != nil {
		for _, v := range []string{`null`, `[]`, `"x"`, `1`, `true`, `[{}]`} {
			out = append(out, agreementCase{name: "body " + v, target: base, contentType: "application/json", body: []byte(v), valid: false})
		}
		for _, m := range d.objectMutations(t, bodySchema, validBody.(map[string]any), op.id+" body", 0) {
			add(m.what, base, m.value, false)
		}
	}
	add("valid", base, validBody, true)
	if bodySchema != nil && !bodyRequired {
		add(validWithoutBody, base, nil, true)
	}
	return out
}

// objectMutations are copies of the valid object v, each invalid in one way.
func (d *agreementDoc) objectMutations(t *testing.T, s map[string]any, v map[string]any, where string, depth int) []invalid {
	t.Helper()
	var out []invalid
	with := func(name string, value any) map[string]any {
		c := cloneObject(v)
		c[name] = value
		return c
	}
	for _, name := range required(s) {
		c := cloneObject(v)
		delete(c, name)
		out = append(out, invalid{where + "." + name + " missing", c})
	}
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		out = append(out, invalid{where + " with an unknown member", with("zz_unknown", 1)})
	}
	if alts, ok := s["anyOf"].([]any); ok {
		c := cloneObject(v)
		for _, a := range alts {
			for _, name := range required(a.(map[string]any)) {
				delete(c, name)
			}
		}
		out = append(out, invalid{where + " giving none of anyOf", c})
		for _, a := range alts {
			alt := a.(map[string]any)
			props, _ := alt["properties"].(map[string]any)
			for name, ps := range props {
				if not, _ := ps.(map[string]any)["not"].(map[string]any); not["type"] == "null" {
					only := cloneObject(c)
					only[name] = nil
					out = append(out, invalid{where + " giving only " + name + ": null", only})
				}
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps := d.resolve(props[name].(map[string]any))
		for _, iv := range d.invalidValues(t, ps, where+"."+name) {
			out = append(out, invalid{where + "." + name + " " + iv.what, with(name, iv.value)})
		}
		if inner, ok := v[name].(map[string]any); ok && mainType(ps) == "object" && depth < 2 {
			for _, m := range d.objectMutations(t, ps, inner, where+"."+name, depth+1) {
				out = append(out, invalid{m.what, with(name, m.value)})
			}
		}
	}
	return out
}

func cloneObject(v map[string]any) map[string]any {
	c := make(map[string]any, len(v))
	for k, x := range v {
		c[k] = x
	}
	return c
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, x := range v {
		c[k] = append([]string(nil), x...)
	}
	return c
}

// queryText writes a JSON value as a query string carries it.
func queryText(v any) string {
	if f, ok := v.(float64); ok && f == math.Trunc(f) {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

// agreementFixture prepares what one operation's requests name.
type agreementFixture func(t *testing.T, e *agreementEnv, st *agreementState)

// Why a valid request cannot be answered 2xx on the operations that say so.
const (
	signedBySender = "the sender signs the request (a provider, Twilio, Stripe or the mail relay): a request made from the schema alone carries no signature"
	reportBody     = "the body is a TLS report (RFC 8460), which the schema names by its media type only"
)

// agreementFixtures lists every operation of the document; nil when a fresh
// account is all it needs. A new route fails the test until it is listed.
var agreementFixtures = map[string]agreementFixture{
	// Accounts, keys and the calling key's own resources.
	"createAccount": nil, "getAccount": nil, "updateAccount": nil, "deleteAccount": nil,
	"listAPIKeys": nil, "createAPIKey": nil,
	"revokeAPIKey": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.call(t, st, "POST", "/api/accounts/me/api-keys", map[string]any{"label": "second"})["id"].(string)
	},
	"dashboardSummary": nil, "apiUsage": nil, "getAccountPlan": nil,
	"issueToken": nil, "jwks": nil, "healthz": nil, "readyz": nil, "metrics": nil, "openapi": nil,

	// Events and alerts.
	"listEvents": nil, "listEventTypes": nil, "eventDailyVolume": nil, "eventTypeBreakdown": nil,
	"messageDailyVolume": nil, "messageTypeBreakdown": nil, "listAlerts": nil,
	"acknowledgeAlert": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["event_id"] = e.alert(t, st)
	},
	"unacknowledgeAlert": func(t *testing.T, e *agreementEnv, st *agreementState) {
		id := e.alert(t, st)
		e.call(t, st, "POST", "/api/accounts/me/alerts/"+id+"/acknowledge", map[string]any{"acknowledged_by": "oncall"})
		st.params["event_id"] = id
	},

	// Event subscriptions and deliveries.
	"listEventSubscriptions": nil, "createEventSubscription": nil, "listDeliveries": nil,
	"getEventSubscription":          subscriptionFixture,
	"updateEventSubscription":       subscriptionFixture,
	"deleteEventSubscription":       subscriptionFixture,
	"testEventSubscription":         subscriptionFixture,
	"rotateEventSubscriptionSecret": subscriptionFixture,
	"recoverEventSubscription": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.subscription(t, st)
		// The schema's example is a fixed date; a recovery starts at most 14 days ago.
		st.body["since"] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	},
	"getDelivery": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.delivery(t, st)
	},
	"retryDelivery": func(t *testing.T, e *agreementEnv, st *agreementState) {
		id := e.delivery(t, st)
		// A delivery whose only attempt failed and whose job River has
		// finished, as a worker would leave them.
		err := dbutil.WithTx(context.Background(), e.b.db, func(ctx context.Context, tx dbutil.Tx) error {
			var job int64
			if err := tx.QueryRow(ctx, "UPDATE webhook_deliveries SET status = 'failed', attempts = 1 WHERE id = $1 RETURNING job_id", id).Scan(&job); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = 1 WHERE id = $1", job)
			return err
		})
		require.NoError(t, err)
		st.params["id"] = id
	},

	// Notification channels (channels.go), sending to the loopback hook
	// (the env's CHANNEL_ALLOWED_HOSTS).
	"listNotificationChannels": nil,
	"createNotificationChannel": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.body["url"] = e.hook.URL + "/services/T0/B0/x"
	},
	"getNotificationChannel":    channelFixture,
	"updateNotificationChannel": channelFixture,
	"deleteNotificationChannel": channelFixture,
	"testNotificationChannel":   channelFixture,

	// Receivers and their messages.
	"listReceivers": nil, "createReceiver": nil, "receiverDailyVolume": nil,
	"getReceiver":          receiverFixture,
	"deleteReceiver":       receiverFixture,
	"listReceiverMessages": receiverFixture,
	"waitReceiver": func(t *testing.T, e *agreementEnv, st *agreementState) {
		id, address := e.receiver(t, st)
		e.message(t, address)
		st.params["id"] = id
	},
	// A label-wide wait: a message stored before the request counts with a
	// since that looks back, so the valid request answers at once.
	"waitReceivers": func(t *testing.T, e *agreementEnv, st *agreementState) {
		r := e.call(t, st, "POST", "/api/accounts/me/receivers", map[string]any{"label": "agreement"})
		e.message(t, r["address"].(string))
		st.query["label"] = "agreement"
		st.query["since"] = "2000-01-01T00:00:00Z"
	},
	"getReceiverMessage":    messageFixture,
	"deleteReceiverMessage": messageFixture,
	"getReceiverMessageRaw": messageFixture,
	// Deliverability analysis (receivers_analysis.go).
	"getReceiverMessageAnalysis": messageFixture, "assertReceiverMessage": messageFixture,

	// Domains, their checks, reports and DNS fixes.
	"listDomains": nil, "createDomain": nil,
	"getDomain": domainFixture, "updateDomain": domainFixture, "deleteDomain": domainFixture,
	"lookupDomainDNS": domainFixture, "listDomainHealth": domainFixture, "recomputeDomainHealth": domainFixture,
	"listDNSRecommendations": domainFixture, "getDMARCGuidance": domainFixture, "listDMARCSources": domainFixture, "dmarcDailyVolume": domainFixture, "listDMARCReporters": domainFixture, "listDKIMSelectors": domainFixture,
	"listDMARCReports": domainFixture, "listDMARCFailureReports": domainFixture, "listTLSReports": domainFixture,
	"getReportingAddress": domainFixture, "signReportingAddress": domainFixture, "uploadReport": domainFixture,
	"setupMX": domainFixture, "getDomainTransport": domainFixture, "checkDomainTransport": domainFixture,
	"listDMARCSubdomains": domainFixture,
	// Blocklists (reputation.go).
	"getDomainReputation": domainFixture, "checkDomainReputation": domainFixture, "addReputationPin": domainFixture,
	"removeReputationPin": func(t *testing.T, e *agreementEnv, st *agreementState) {
		// The range the document's example names, which the request sends.
		e.domain(t, st)
		e.call(t, st, "POST", "/api/accounts/me/domains/example.com/reputation/pins", map[string]any{"cidr": "192.0.2.8/30"})
	},
	"getMXSetup": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		e.call(t, st, "POST", "/api/accounts/me/domains/example.com/mx-setup", map[string]any{"subdomain": "reports"})
	},
	"verifyMX": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		e.call(t, st, "POST", "/api/accounts/me/domains/example.com/mx-setup", map[string]any{"subdomain": "reports"})
	},
	"getReceivedReport": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.upload(t, st, "", []byte("<feedback/>"))
	},
	"getDMARCReport": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		e.b.rptParse(t, uuid.MustParse(e.upload(t, st, "", dmarcAggregate(time.Now()))))
		list := e.list(t, st, "/api/accounts/me/domains/example.com/dmarc/reports")
		require.NotEmpty(t, list, "the uploaded aggregate report was accepted")
		st.params["id"] = list[0]["id"].(string)
	},
	"getTLSReport": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		e.b.rptParse(t, uuid.MustParse(e.upload(t, st, "tlsrpt", tlsReport(time.Now()))))
		list := e.list(t, st, "/api/accounts/me/domains/example.com/tls-reports")
		require.NotEmpty(t, list, "the uploaded TLS report was accepted")
		st.params["id"] = list[0]["id"].(string)
	},
	"applyDNSRecommendation": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		conn := e.dnsConnection(t, st)
		e.call(t, st, "POST", "/api/accounts/me/dns-providers/"+conn+"/links", map[string]any{"domain": "example.com"})
		st.params["id"] = e.recommendation(t, st, false)
	},
	"dismissDNSRecommendation": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.recommendation(t, st, true)
	},
	"restoreDNSRecommendation": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		id := e.recommendation(t, st, true)
		e.call(t, st, "POST", "/api/accounts/me/domains/example.com/dns-recommendations/"+id+"/dismiss", map[string]any{"reason": "later"})
		st.params["id"] = id
	},

	// DNS connections.
	"listDNSProviders": nil, "createDNSProvider": nil,
	"getDNSProvider": dnsConnectionFixture, "updateDNSProvider": dnsConnectionFixture, "deleteDNSProvider": dnsConnectionFixture,
	"linkDNSProvider": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.dnsConnection(t, st)
	},
	"unlinkDNSProvider": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.dnsConnection(t, st)
		e.call(t, st, "POST", "/api/accounts/me/dns-providers/"+st.params["id"]+"/links", map[string]any{"domain": "example.com"})
	},

	// Sending providers and suppressions.
	"listSendingProviders": nil, "createSendingProvider": nil,
	"getSendingProvider": sendingProviderFixture, "updateSendingProvider": sendingProviderFixture, "deleteSendingProvider": sendingProviderFixture,
	"linkSendingProvider": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.sendingProvider(t, st)
	},
	"unlinkSendingProvider": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		st.params["id"] = e.sendingProvider(t, st)
		e.call(t, st, "POST", "/api/accounts/me/sending-providers/"+st.params["id"]+"/links", map[string]any{"domain": "example.com"})
	},
	"addSuppression": nil, "checkSuppression": nil,
	"removeSuppression": func(t *testing.T, e *agreementEnv, st *agreementState) {
		// The address the document's example names, which the request sends.
		e.call(t, st, "POST", "/api/accounts/me/suppressions", map[string]any{"email": "bounced@example.com"})
	},

	// Identity providers.
	"listAuthProviders": nil, "createAuthProvider": nil,
	"getAuthProvider": authProviderFixture, "updateAuthProvider": authProviderFixture, "deleteAuthProvider": authProviderFixture,
	"listAuthProviderLinks": authProviderFixture, "createAuthProviderLink": authProviderFixture,
	"deleteAuthProviderLink": func(t *testing.T, e *agreementEnv, st *agreementState) {
		id := e.authProvider(t, st)
		st.params["id"] = id
		st.params["link_id"] = e.call(t, st, "POST", "/api/accounts/me/auth-providers/"+id+"/links", map[string]any{"subject": "user-1"})["id"].(string)
	},

	// Preferences and notification addresses.
	"getPreferences": nil, "getWeeklyDigest": nil, "setWeeklyDigest": nil, "setPreferenceGroup": nil, "setPreferenceOverride": nil, "setChannelMutes": nil,
	"deletePreferenceOverride": func(t *testing.T, e *agreementEnv, st *agreementState) {
		// The request names the first type the document lists.
		typ := notify.OverridableTypes()[0]
		e.call(t, st, "PUT", "/api/accounts/me/preferences/overrides/"+typ, map[string]any{"email": false})
	},
	"listNotificationAddresses": nil, "addNotificationAddress": nil,
	"removeNotificationAddress": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.address(t, st)
	},
	"resendNotificationAddressVerification": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.address(t, st)
		// One verification mail a minute per address: the resend comes
		// after that minute.
		st.before = func() { e.offset.Add(int64(2 * time.Minute)) }
	},
	"verifyNotificationAddress": func(t *testing.T, e *agreementEnv, st *agreementState) {
		id := e.address(t, st)
		// The token the verification job would mail.
		token, _, ok, err := notify.NewToken(context.Background(), e.b.db, uuid.MustParse(id), time.Now())
		require.NoError(t, err)
		require.True(t, ok)
		st.body["token"] = token
	},

	// Administration.
	"adminSearchAccounts": nil, "adminQueueStats": nil, "adminRunMaintenance": nil,
	"listSMSNumbers": nil, "addSMSNumber": nil,
	"removeSMSNumber": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.call(t, st, "POST", "/api/admin/sms-numbers", map[string]any{"phone_number": "+14155550101"})
		st.params["phone_number"] = "+14155550101"
	},
	"adminInjectEvent": func(_ *testing.T, _ *agreementEnv, st *agreementState) { st.params["account_id"] = st.acct.ID },
	"adminSetPlan":     func(_ *testing.T, _ *agreementEnv, st *agreementState) { st.params["account_id"] = st.acct.ID },
	"adminSuspendAccount": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["account_id"] = e.b.createAccount(t).ID
	},
	"adminUnsuspendAccount": func(t *testing.T, e *agreementEnv, st *agreementState) {
		other := e.b.createAccount(t).ID
		e.call(t, st, "POST", "/api/admin/accounts/"+other+"/suspend", map[string]any{"reason": "review"})
		st.params["account_id"] = other
	},

	// The data API.
	"dataAPIRead": tokenFixture, "dataAPIHead": tokenFixture,

	// Webhook ingress.
	"ingestEmail": func(_ *testing.T, _ *agreementEnv, st *agreementState) { st.noSuccess = signedBySender },
	"ingestSMS":   func(_ *testing.T, _ *agreementEnv, st *agreementState) { st.noSuccess = signedBySender },
	"ingestStripeEvent": func(_ *testing.T, _ *agreementEnv, st *agreementState) {
		st.noSuccess = signedBySender
	},
	"ingestProviderWebhook": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["id"] = e.sendingProvider(t, st)
		st.noSuccess = signedBySender
	},
	"ingestAuthProviderEvent": func(t *testing.T, e *agreementEnv, st *agreementState) {
		st.params["provider_id"] = e.authProvider(t, st)
		st.noSuccess = signedBySender
	},
	"ingestTLSReport": func(t *testing.T, e *agreementEnv, st *agreementState) {
		e.domain(t, st)
		path := e.call(t, st, "GET", "/api/accounts/me/domains/example.com/reporting-address", nil)["tlsrpt_https_path"].(string)
		st.params["token"] = strings.TrimPrefix(path, "/api/webhooks/tlsrpt/")
		st.noSuccess = reportBody
	},
}

func domainFixture(t *testing.T, e *agreementEnv, st *agreementState) { e.domain(t, st) }

func subscriptionFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.params["id"] = e.subscription(t, st)
}

func channelFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	t.Helper()
	st.params["id"] = e.call(t, st, "POST", "/api/accounts/me/notification-channels",
		map[string]any{"kind": "slack", "url": e.hook.URL + "/services/T0/B0/x"})["id"].(string)
}

func receiverFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.params["id"], _ = e.receiver(t, st)
}

func messageFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	id, address := e.receiver(t, st)
	st.params["id"], st.params["message_id"] = id, e.message(t, address)
}

func dnsConnectionFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.params["id"] = e.dnsConnection(t, st)
}

func sendingProviderFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.params["id"] = e.sendingProvider(t, st)
}

func authProviderFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.params["id"] = e.authProvider(t, st)
}

func tokenFixture(t *testing.T, e *agreementEnv, st *agreementState) {
	st.bearer = e.call(t, st, "POST", "/api/auth/token", nil)["access_token"].(string)
}

// call makes one request of a fixture as the state's account; it must
// succeed. An object answer is returned (nil for any other).
func (e *agreementEnv) call(t *testing.T, st *agreementState, method, path string, body any) map[string]any {
	t.Helper()
	resp := e.b.do(t, method, path, st.acct.Key, body)
	require.Less(t, resp.Status, 300, "%s %s: %s", method, path, resp.Body)
	var out map[string]any
	if json.Unmarshal(resp.Body, &out) != nil {
		return nil
	}
	return out
}

// list reads a listing of the state's account.
func (e *agreementEnv) list(t *testing.T, st *agreementState, path string) []map[string]any {
	t.Helper()
	resp := e.b.do(t, "GET", path, st.acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out []map[string]any
	resp.JSON(t, &out)
	return out
}

// domain adds example.com, the name the document's examples use.
func (e *agreementEnv) domain(t *testing.T, st *agreementState) {
	t.Helper()
	e.call(t, st, "POST", "/api/accounts/me/domains", map[string]any{"domain": "example.com"})
	st.params["domain"] = "example.com"
}

func (e *agreementEnv) receiver(t *testing.T, st *agreementState) (id, address string) {
	t.Helper()
	r := e.call(t, st, "POST", "/api/accounts/me/receivers", map[string]any{})
	return r["id"].(string), r["address"].(string)
}

// message delivers one message to a receiver address through the signed
// email ingress and returns its id.
func (e *agreementEnv) message(t *testing.T, address string) string {
	t.Helper()
	raw := []byte("From: Bank <alerts@bank.example>\r\nSubject: Code\r\n\r\nYour code is 7391.\r\n")
	resp := e.b.rcvRawDo(t, signedEmail(t, testInboundSecret, address, raw, time.Now()))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out struct {
		MessageID string `json:"message_id"`
	}
	resp.JSON(t, &out)
	return out.MessageID
}

func (e *agreementEnv) subscription(t *testing.T, st *agreementState) string {
	t.Helper()
	return e.call(t, st, "POST", "/api/accounts/me/event-subscriptions", map[string]any{"url": e.hook.URL + "/hook"})["id"].(string)
}

// alert injects a critical event into the account and returns its id.
func (e *agreementEnv) alert(t *testing.T, st *agreementState) string {
	t.Helper()
	body := map[string]any{"event_type": "health_score_changed", "severity": "critical",
		"payload": map[string]any{"domain": "example.com", "previous_score": 82, "score": 45, "delta": -37}}
	return e.call(t, st, "POST", "/api/admin/accounts/"+st.acct.ID+"/events", body)["id"].(string)
}

// delivery is a delivery of an event to a subscription of the account.
func (e *agreementEnv) delivery(t *testing.T, st *agreementState) string {
	t.Helper()
	e.subscription(t, st)
	e.alert(t, st)
	items := e.list(t, st, "/api/accounts/me/deliveries")
	require.NotEmpty(t, items)
	return items[0]["id"].(string)
}

func (e *agreementEnv) sendingProvider(t *testing.T, st *agreementState) string {
	t.Helper()
	body := map[string]any{"kind": "ses", "label": fmt.Sprintf("ses-%d", e.seq.Add(1)),
		"config": map[string]any{"topic_arns": []string{"arn:aws:sns:us-east-1:123456789012:ses-events"}}}
	return e.call(t, st, "POST", "/api/accounts/me/sending-providers", body)["id"].(string)
}

func (e *agreementEnv) authProvider(t *testing.T, st *agreementState) string {
	t.Helper()
	body := map[string]any{"kind": "supabase", "issuer": fmt.Sprintf("https://idp%d.example/auth/v1", e.seq.Add(1)),
		"jwks_url": "https://example.com/.well-known/jwks.json", "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	return e.call(t, st, "POST", "/api/accounts/me/auth-providers", body)["id"].(string)
}

// dnsConnection is a Cloudflare connection, verified against the loopback
// Cloudflare API.
func (e *agreementEnv) dnsConnection(t *testing.T, st *agreementState) string {
	t.Helper()
	body := map[string]any{"kind": "cloudflare", "label": fmt.Sprintf("cf-%d", e.seq.Add(1)), "config": map[string]any{"api_token": "good-token-123456"}}
	return e.call(t, st, "POST", "/api/accounts/me/dns-providers", body)["id"].(string)
}

func (e *agreementEnv) address(t *testing.T, st *agreementState) string {
	t.Helper()
	return e.call(t, st, "POST", "/api/accounts/me/notification-addresses", map[string]any{"email": fmt.Sprintf("oncall-%d@example.com", e.seq.Add(1))})["id"].(string)
}

// upload posts a report file for example.com and returns the received id.
func (e *agreementEnv) upload(t *testing.T, st *agreementState, kind string, body []byte) string {
	t.Helper()
	path := "/api/accounts/me/domains/example.com/reports"
	if kind != "" {
		path += "?kind=" + kind
	}
	resp := e.b.rptRawDo(t, "POST", path, st.acct.Key, "application/octet-stream", body)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var out struct {
		ID string `json:"id"`
	}
	resp.JSON(t, &out)
	return out.ID
}

// recommendation runs example.com's checks against the loopback DNS server
// and stores their recommendations, as the check job does; it returns one
// that can be applied (manual allowed or not).
func (e *agreementEnv) recommendation(t *testing.T, st *agreementState, manual bool) string {
	t.Helper()
	ctx := context.Background()
	tx := e.b.db.(pgx.Tx)
	d, err := dbsqlc.New().DomainGetByName(ctx, tx, dbsqlc.DomainGetByNameParams{AccountID: uuid.MustParse(st.acct.ID), Name: "example.com"})
	require.NoError(t, err)
	results := dnscheck.CheckAll(ctx, "example.com", dnscheck.Options{Resolver: dnscheck.NewClient(e.dns.Addr(), 500*time.Millisecond), SkipSelectorProbe: true})
	recs, err := dnsfix.Recompute(ctx, tx, d, results, dnsfix.Inputs{}, time.Now())
	require.NoError(t, err)
	for _, r := range recs {
		if manual || !r.Manual {
			return r.ID.String()
		}
	}
	t.Fatalf("no recommendation for example.com: %+v", recs)
	return ""
}

// dmarcAggregate is a DMARC aggregate report (RFC 7489 appendix C) about
// example.com for the day before at.
func dmarcAggregate(at time.Time) []byte {
	return []byte(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<feedback>
  <report_metadata>
    <org_name>reporter.example</org_name>
    <email>dmarc@reporter.example</email>
    <report_id>agreement-%d</report_id>
    <date_range><begin>%d</begin><end>%d</end></date_range>
  </report_metadata>
  <policy_published><domain>example.com</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><pct>100</pct></policy_published>
  <record>
    <row>
      <source_ip>192.0.2.10</source_ip>
      <count>3</count>
      <policy_evaluated><disposition>none</disposition><dkim>pass</dkim><spf>pass</spf></policy_evaluated>
    </row>
    <identifiers><header_from>example.com</header_from></identifiers>
    <auth_results>
      <dkim><domain>example.com</domain><result>pass</result></dkim>
      <spf><domain>example.com</domain><result>pass</result></spf>
    </auth_results>
  </record>
</feedback>
`, at.UnixNano(), at.Add(-24*time.Hour).Unix(), at.Unix()))
}

// tlsReport is an SMTP TLS report (RFC 8460 section 4) about example.com
// for the day before at.
func tlsReport(at time.Time) []byte {
	return []byte(fmt.Sprintf(`{"organization-name":"reporter.example","date-range":{"start-datetime":%q,"end-datetime":%q},`+
		`"contact-info":"tls@reporter.example","report-id":"agreement-%d","policies":[{"policy":{"policy-type":"no-policy-found",`+
		`"policy-domain":"example.com"},"summary":{"total-successful-session-count":5,"total-failure-session-count":0}}]}`,
		at.Add(-24*time.Hour).UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339), at.UnixNano()))
}
