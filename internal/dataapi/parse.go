// Package dataapi serves tenant reads in PostgREST's read grammar
// (https://postgrest.org/en/stable/references/api/tables_views.html), the
// subset supabase-js sends: select=, horizontal filters (filter.go: the
// comparison, pattern, list, containment and full-text operators, negated
// with not., combined with or=/and=), order=, limit=, offset=,
// Prefer: count=exact and the singular-object media type.
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
	MaxFilters      = 32 // conditions, counting each one inside or=/and=
	MaxLogicDepth   = 5  // nesting of or(...)/and(...) groups
	MaxOrderTerms   = 8
	MaxInValues     = 200
	MaxSelectFields = 64
)

// Order is one term of order=.
type Order struct {
	Column     string
	Desc       bool
	NullsFirst *bool // nil: Postgres's default for the direction
}

// Request is a parsed read request.
type Request struct {
	Select  []string // nil means *
	Filters []Filter // column=op.value, all of which must hold
	Logic   []Logic  // or=(...), and=(...) and their negations, all of which must hold
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
	// Keys in order: the same request always gives the same SQL text, so
	// the connection's prepared-statement cache is reused.
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	conditions := 0
	for _, key := range keys {
		vs := values[key]
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
		case "or", "and", "not.or", "not.and":
			for _, v := range vs {
				l, err := parseLogic(key, v, &conditions)
				if err != nil {
					return nil, err
				}
				r.Logic = append(r.Logic, l)
			}
		default:
			if !validIdent(key) {
				return nil, parseError("%q is not a column name (embedded resources and JSON paths are not supported)", key)
			}
			for _, v := range vs {
				f, err := parseFilter(key, v)
				if err != nil {
					return nil, err
				}
				if conditions++; conditions > MaxFilters {
					return nil, parseError("at most %d filter conditions, counting those inside or=/and=", MaxFilters)
				}
				r.Filters = append(r.Filters, f)
			}
		}
	}
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
