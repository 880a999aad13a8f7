package dataapi

import (
	"fmt"
	"net/http"
	"strings"
)

// Op is a filter operator, named as in the query string.
type Op string

// Operators PostgREST defines. The builder answers each one for the column
// type it is used on: an operator that does not apply to the type is
// refused as Postgres would refuse it (42883).
const (
	OpEq  Op = "eq"
	OpNeq Op = "neq"
	OpGt  Op = "gt"
	OpGte Op = "gte"
	OpLt  Op = "lt"
	OpLte Op = "lte"
	// OpLike and OpILike take a LIKE pattern in which * stands for %, as in
	// PostgREST; % and _ keep their LIKE meaning and \ escapes.
	OpLike  Op = "like"
	OpILike Op = "ilike"
	// OpMatch and OpIMatch (regular expressions) are parsed only to be
	// refused by name.
	OpMatch      Op = "match"
	OpIMatch     Op = "imatch"
	OpIn         Op = "in"
	OpIs         Op = "is"
	OpIsDistinct Op = "isdistinct"
	OpContains   Op = "cs"
	OpContained  Op = "cd"
	OpOverlap    Op = "ov"
	// Range operators: no column of this API is a range, so they are
	// refused (42883) wherever they are used.
	OpStrictlyLeft    Op = "sl"
	OpStrictlyRight   Op = "sr"
	OpNotExtendsRight Op = "nxr"
	OpNotExtendsLeft  Op = "nxl"
	OpAdjacent        Op = "adj"
	// Full-text search: the column (text or jsonb) goes through to_tsvector.
	OpFts   Op = "fts"
	OpPlFts Op = "plfts"
	OpPhFts Op = "phfts"
	OpWFts  Op = "wfts"
)

// opKind says what may follow an operator's name.
type opKind int

const (
	opPlain        opKind = iota
	opQuantifiable        // may take (any) or (all) and then a {list}
	opFullText            // may take (language)
)

var ops = map[string]opKind{
	"eq": opQuantifiable, "gt": opQuantifiable, "gte": opQuantifiable, "lt": opQuantifiable, "lte": opQuantifiable,
	"like": opQuantifiable, "ilike": opQuantifiable, "match": opQuantifiable, "imatch": opQuantifiable,
	"neq": opPlain, "in": opPlain, "is": opPlain, "isdistinct": opPlain, "cs": opPlain, "cd": opPlain, "ov": opPlain,
	"sl": opPlain, "sr": opPlain, "nxr": opPlain, "nxl": opPlain, "adj": opPlain,
	"fts": opFullText, "plfts": opFullText, "phfts": opFullText, "wfts": opFullText,
}

const opList = "eq, neq, gt, gte, lt, lte, like, ilike, in, is, isdistinct, cs, cd, ov, fts, plfts, phfts, wfts"

// Filter is one column=[not.]op[(modifier)].value condition.
type Filter struct {
	Column string
	Op     Op
	Not    bool
	// Quant is "any" or "all" for eq(any).{a,b} and the like; Value is then
	// a Postgres array literal.
	Quant string
	// Lang is the text-search configuration of fts(english) and the like.
	Lang   string
	Value  string   // all but in; for is: null, not_null, true, false or unknown
	Values []string // in
}

// Logic is one node of or=(...)/and=(...): a group of nodes joined by OR or
// AND, or a single filter.
type Logic struct {
	Not      bool
	Or       bool
	Children []Logic
	Filter   *Filter // a leaf
}

func unsupportedOp(op Op, why string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "PGRST100",
		Message: fmt.Sprintf("operator %q is not supported", string(op)), Details: why}
}

// scanner reads a filter expression from left to right.
type scanner struct {
	s string
	i int
}

func (p *scanner) rest() string { return p.s[p.i:] }

func (p *scanner) eof() bool { return p.i >= len(p.s) }

func (p *scanner) consume(prefix string) bool {
	if strings.HasPrefix(p.s[p.i:], prefix) {
		p.i += len(prefix)
		return true
	}
	return false
}

func (p *scanner) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// parseFilter reads the value of a column=... query parameter.
func parseFilter(column, v string) (Filter, error) {
	p := &scanner{s: v}
	return parseOpExpr(p, column, false)
}

// parseOpExpr reads [not.]op[(modifier)].value. At the top level the value
// is the rest of the parameter; inside or=/and= it ends at a comma or a
// closing parenthesis unless quoted.
func parseOpExpr(p *scanner, column string, inLogic bool) (Filter, error) {
	f := Filter{Column: column}
	whole := p.rest()
	if p.consume("not.") {
		f.Not = true
	}
	j := p.i
	for j < len(p.s) && p.s[j] >= 'a' && p.s[j] <= 'z' {
		j++
	}
	name := p.s[p.i:j]
	kind, known := ops[name]
	if !known {
		return f, parseError("%s=%s: expected an operator (%s) followed by a dot", column, whole, opList)
	}
	f.Op = Op(name)
	p.i = j
	if f.Op == OpMatch || f.Op == OpIMatch {
		return f, unsupportedOp(f.Op, "regular expressions are not evaluated by this API; use like or ilike (* is the wildcard)")
	}
	if p.consume("(") {
		end := strings.IndexByte(p.rest(), ')')
		if end < 0 {
			return f, parseError("%s=%s: unclosed parenthesis after %s", column, whole, name)
		}
		mod := p.s[p.i : p.i+end]
		p.i += end + 1
		switch kind {
		case opQuantifiable:
			if mod != "any" && mod != "all" {
				return f, parseError("%s=%s: %s takes (any) or (all)", column, whole, name)
			}
			f.Quant = mod
		case opFullText:
			f.Lang = strings.TrimSpace(mod)
			if !validLang(f.Lang) {
				return f, parseError("%s=%s: %q is not a text search configuration name", column, whole, mod)
			}
		default:
			return f, parseError("%s=%s: %s takes no modifier", column, whole, name)
		}
	}
	if !p.consume(".") {
		return f, parseError("%s=%s: expected a dot after the operator %s", column, whole, name)
	}
	switch f.Op {
	case OpIn:
		list := p.rest()
		if inLogic {
			var ok bool
			if list, ok = listExtent(p); !ok {
				return f, parseError("%s=%s: in takes a list in parentheses", column, whole)
			}
		} else {
			p.i = len(p.s)
		}
		vals, err := parseList(list)
		if err != nil {
			return f, parseError("%s=in.%s: %v", column, list, err)
		}
		f.Values = vals
	case OpIs:
		v := value(p, inLogic)
		switch strings.ToLower(v) {
		case "null", "not_null", "true", "false", "unknown":
			f.Value = strings.ToLower(v)
		default:
			return f, parseError("%s=is.%s: is takes null, not_null, true, false or unknown", column, v)
		}
	default:
		f.Value = value(p, inLogic)
		listed := f.Quant != "" || f.Op == OpContains || f.Op == OpContained || f.Op == OpOverlap
		if listed && strings.Count(f.Value, ",") >= MaxInValues {
			return f, parseError("%s=%s: at most %d values in the list", column, whole, MaxInValues)
		}
	}
	return f, nil
}

// validLang accepts a text search configuration name (bound as a
// parameter all the same).
func validLang(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// value reads a filter's value: at the top level, everything left; inside
// or=/and=, as PostgREST does, a double-quoted string (with \ escapes) when
// a comma or parenthesis follows its closing quote, else a {...} array
// literal, else everything up to the next comma or closing parenthesis.
func value(p *scanner, inLogic bool) string {
	rest := p.rest()
	if !inLogic {
		p.i = len(p.s)
		return rest
	}
	if v, n, ok := quoted(rest); ok {
		p.i += n
		return v
	}
	if strings.HasPrefix(rest, "{") {
		if end := strings.IndexAny(rest[1:], "{}"); end >= 0 && rest[1+end] == '}' {
			p.i += end + 2
			return rest[:end+2]
		}
	}
	end := strings.IndexAny(rest, ",)")
	if end < 0 {
		end = len(rest)
	}
	p.i += end
	return rest[:end]
}

// quoted reads "..." at the start of s when the closing quote is followed
// by a comma, a closing parenthesis or the end; n is the bytes read.
func quoted(s string) (v string, n int, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", 0, false
	}
	var b strings.Builder
	for k := 1; k < len(s); k++ {
		switch c := s[k]; c {
		case '\\':
			if k+1 >= len(s) {
				return "", 0, false
			}
			k++
			b.WriteByte(s[k])
		case '"':
			if k+1 < len(s) && s[k+1] != ',' && s[k+1] != ')' {
				return "", 0, false
			}
			return b.String(), k + 1, true
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// listExtent reads a parenthesised list inside or=/and= (items quoted or
// not, as value reads them) and returns its text, parentheses included.
func listExtent(p *scanner) (string, bool) {
	p.skipSpace()
	start := p.i
	if !p.consume("(") {
		return "", false
	}
	for {
		if _, n, ok := quoted(p.rest()); ok {
			p.i += n
		} else {
			end := strings.IndexAny(p.rest(), ",)")
			if end < 0 {
				return "", false
			}
			p.i += end
		}
		if p.consume(")") {
			list := p.s[start:p.i]
			p.skipSpace()
			return list, true
		}
		if !p.consume(",") {
			return "", false
		}
	}
}

// parseLogic reads or=(...), and=(...), not.or=(...) or not.and=(...);
// conditions counts the filters of the whole request.
func parseLogic(key, v string, conditions *int) (Logic, error) {
	if !strings.HasPrefix(v, "(") {
		return Logic{}, parseError("%s=%s: expected a list of conditions in parentheses", key, v)
	}
	p := &scanner{s: key + v}
	l, err := parseNode(p, 1, conditions)
	if err != nil {
		return l, err
	}
	p.skipSpace()
	if !p.eof() {
		return l, parseError("%s=%s: unexpected %q after the closing parenthesis", key, v, p.rest())
	}
	return l, nil
}

// parseNode reads one condition of a logic tree: [not.]and(...) or
// [not.]or(...) (depth is its nesting), or column.[not.]op.value.
func parseNode(p *scanner, depth int, conditions *int) (Logic, error) {
	p.skipSpace()
	start := p.i
	not := p.consume("not.")
	for _, group := range []string{"and(", "or("} {
		if !p.consume(group) {
			continue
		}
		if depth > MaxLogicDepth {
			return Logic{}, parseError("or/and groups nest at most %d deep", MaxLogicDepth)
		}
		l := Logic{Not: not, Or: group == "or("}
		for {
			child, err := parseNode(p, depth+1, conditions)
			if err != nil {
				return l, err
			}
			l.Children = append(l.Children, child)
			p.skipSpace()
			if p.consume(")") {
				return l, nil
			}
			if !p.consume(",") {
				return l, parseError("expected a comma or a closing parenthesis at %q", p.rest())
			}
		}
	}
	p.i = start
	j := p.i
	for j < len(p.s) && (p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= '0' && p.s[j] <= '9' || p.s[j] == '_') {
		j++
	}
	column := p.s[p.i:j]
	if !validIdent(column) {
		return Logic{}, parseError("expected a column name or and(...)/or(...) at %q", p.rest())
	}
	p.i = j
	p.skipSpace()
	if !p.consume(".") {
		return Logic{}, parseError("expected a dot after the column %s", column)
	}
	f, err := parseOpExpr(p, column, true)
	if err != nil {
		return Logic{}, err
	}
	if *conditions++; *conditions > MaxFilters {
		return Logic{}, parseError("at most %d filter conditions, counting those inside or=/and=", MaxFilters)
	}
	return Logic{Filter: &f}, nil
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
