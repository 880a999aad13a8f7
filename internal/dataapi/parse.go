// Package dataapi serves tenant reads in PostgREST's read grammar
// (https://postgrest.org/en/stable/references/api/tables_views.html), the
// subset supabase-js sends: select=, horizontal filters eq, neq, gt, gte,
// lt, lte, in and is (each optionally negated with not.), order=, limit=,
// offset=, Prefer: count=exact and the singular-object media type.
//
// The tenant boundary is not in this package: every query runs as the
// database role "authenticated" with the caller's JWT claims in
// request.jwt.claims, and row-level security policies in the database admit
// only the caller's rows. The SQL built here names only allow-listed tables
// and columns and binds every value as a parameter; its own account filter
// is a second, redundant fence.
package dataapi

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Limits on a request's query string, so a parse is bounded.
const (
	MaxQueryBytes   = 8 << 10
	MaxFilters      = 32
	MaxOrderTerms   = 8
	MaxInValues     = 200
	MaxSelectFields = 64
)

// Op is a filter operator.
type Op string

// Operators.
const (
	OpEq  Op = "eq"
	OpNeq Op = "neq"
	OpGt  Op = "gt"
	OpGte Op = "gte"
	OpLt  Op = "lt"
	OpLte Op = "lte"
	OpIn  Op = "in"
	OpIs  Op = "is"
)

var ops = map[string]Op{"eq": OpEq, "neq": OpNeq, "gt": OpGt, "gte": OpGte, "lt": OpLt, "lte": OpLte, "in": OpIn, "is": OpIs}

// Filter is one column=op.value condition.
type Filter struct {
	Column string
	Op     Op
	Not    bool
	Value  string   // eq..lte; for is: null, true, false or unknown
	Values []string // in
}

// Order is one term of order=.
type Order struct {
	Column     string
	Desc       bool
	NullsFirst *bool // nil: Postgres's default for the direction
}

// Request is a parsed read request.
type Request struct {
	Select  []string // nil means *
	Filters []Filter
	Order   []Order
	Limit   *int
	Offset  int
}

// Error is a request the grammar refuses; Code is PostgREST's.
type Error struct {
	Status  int
	Code    string
	Message string
	Details string
	Hint    string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func parseError(details string, args ...any) *Error {
	return &Error{Status: 400, Code: "PGRST100", Message: "failed to parse request", Details: fmt.Sprintf(details, args...)}
}

// reserved names are query parameters that are not filters.
var reserved = map[string]bool{"select": true, "order": true, "limit": true, "offset": true, "columns": true, "on_conflict": true}

// Parse reads a raw query string (without '?').
func Parse(rawQuery string) (*Request, error) {
	if len(rawQuery) > MaxQueryBytes {
		return nil, &Error{Status: 414, Code: "PGRST100", Message: "query string too long", Details: fmt.Sprintf("at most %d bytes", MaxQueryBytes)}
	}
	values, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, parseError("malformed query string: %v", err)
	}
	r := &Request{}
	for key, vs := range values {
		if len(vs) == 0 {
			continue
		}
		switch key {
		case "select":
			if len(vs) > 1 {
				return nil, parseError("select given more than once")
			}
			if r.Select, err = parseSelect(vs[0]); err != nil {
				return nil, err
			}
		case "order":
			if len(vs) > 1 {
				return nil, parseError("order given more than once")
			}
			if r.Order, err = parseOrder(vs[0]); err != nil {
				return nil, err
			}
		case "limit":
			n, err := parseCount("limit", vs)
			if err != nil {
				return nil, err
			}
			r.Limit = &n
		case "offset":
			if r.Offset, err = parseCount("offset", vs); err != nil {
				return nil, err
			}
		case "columns", "on_conflict":
			// Write parameters: meaningless on a read, ignored as PostgREST does.
		default:
			if !validIdent(key) {
				return nil, parseError("%q is not a column name", key)
			}
			for _, v := range vs {
				f, err := parseFilter(key, v)
				if err != nil {
					return nil, err
				}
				r.Filters = append(r.Filters, f)
				if len(r.Filters) > MaxFilters {
					return nil, parseError("at most %d filters", MaxFilters)
				}
			}
		}
	}
	// A stable order gives the same SQL text for the same request, so the
	// connection's prepared-statement cache is reused.
	sort.SliceStable(r.Filters, func(i, j int) bool { return r.Filters[i].Column < r.Filters[j].Column })
	return r, nil
}

func parseCount(name string, vs []string) (int, error) {
	if len(vs) > 1 {
		return 0, parseError("%s given more than once", name)
	}
	n, err := strconv.Atoi(vs[0])
	if err != nil || n < 0 || n > 1<<30 {
		return 0, parseError("%s must be a whole number, not %q", name, vs[0])
	}
	return n, nil
}

// validIdent accepts the column names this API has: lower-case ASCII
// letters, digits and underscores, starting with a letter or underscore.
func validIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func parseSelect(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxSelectFields {
		return nil, parseError("at most %d selected columns", MaxSelectFields)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "*" {
			return nil, nil
		}
		if !validIdent(p) {
			return nil, parseError("select: %q is not a column name (aliases, casts, JSON paths and embedded resources are not supported)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseOrder(s string) ([]Order, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxOrderTerms {
		return nil, parseError("at most %d order terms", MaxOrderTerms)
	}
	out := make([]Order, 0, len(parts))
	for _, p := range parts {
		fields := strings.Split(strings.TrimSpace(p), ".")
		if !validIdent(fields[0]) || len(fields) > 3 {
			return nil, parseError("order: %q is not column[.asc|.desc][.nullsfirst|.nullslast]", p)
		}
		o := Order{Column: fields[0]}
		for _, m := range fields[1:] {
			switch m {
			case "asc":
				o.Desc = false
			case "desc":
				o.Desc = true
			case "nullsfirst", "nullslast":
				v := m == "nullsfirst"
				o.NullsFirst = &v
			default:
				return nil, parseError("order: unknown modifier %q in %q", m, p)
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func parseFilter(column, v string) (Filter, error) {
	f := Filter{Column: column}
	if rest, ok := strings.CutPrefix(v, "not."); ok {
		f.Not, v = true, rest
	}
	name, arg, ok := strings.Cut(v, ".")
	op, known := ops[name]
	if !ok || !known {
		return f, parseError("%s=%s: expected an operator eq, neq, gt, gte, lt, lte, in or is followed by a dot", column, v)
	}
	f.Op = op
	switch op {
	case OpIs:
		switch strings.ToLower(arg) {
		case "null", "true", "false", "unknown":
			f.Value = strings.ToLower(arg)
		default:
			return f, parseError("%s=is.%s: is takes null, true, false or unknown", column, arg)
		}
	case OpIn:
		vals, err := parseList(arg)
		if err != nil {
			return f, parseError("%s=in.%s: %v", column, arg, err)
		}
		f.Values = vals
	default:
		f.Value = arg
	}
	return f, nil
}

// parseList reads in.(a,b,"c,d") per PostgREST: items separated by commas,
// double-quoted items may hold commas, parentheses and \" or \\ escapes.
func parseList(s string) ([]string, error) {
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return nil, fmt.Errorf("the list must be in parentheses")
	}
	s = s[1 : len(s)-1]
	out := []string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var b strings.Builder
	quoted, inQuotes, afterQuote := false, false, false
	flush := func() error {
		item := b.String()
		if !quoted {
			item = strings.TrimSpace(item)
		}
		out = append(out, item)
		if len(out) > MaxInValues {
			return fmt.Errorf("at most %d values", MaxInValues)
		}
		b.Reset()
		quoted, afterQuote = false, false
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuotes && c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("dangling backslash")
			}
			i++
			b.WriteByte(s[i])
		case inQuotes && c == '"':
			inQuotes, afterQuote = false, true
		case inQuotes:
			b.WriteByte(c)
		case c == '"':
			if afterQuote || strings.TrimSpace(b.String()) != "" {
				return nil, fmt.Errorf("a quote may only start an item")
			}
			b.Reset()
			inQuotes, quoted = true, true
		case c == ',':
			if err := flush(); err != nil {
				return nil, err
			}
		case afterQuote:
			if c != ' ' {
				return nil, fmt.Errorf("text after a quoted item")
			}
		default:
			b.WriteByte(c)
		}
	}
	if inQuotes {
		return nil, fmt.Errorf("unterminated quote")
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
