package dataapi

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

func sortStrings(s []string) { sort.Strings(s) }

// query is built SQL with its arguments; $1 is always the caller's account.
type query struct {
	table    *Table
	sql      string // one row: (json array text, row count)
	countSQL string // one row: total count; empty when not asked
	args     []any
	count    []any
	offset   int
	fullText bool // a full-text filter: see pgError
}

// buildOptions alter the builder; tests use omitAccountFilter to show that
// the database alone keeps tenants apart.
type buildOptions struct {
	omitAccountFilter bool
}

func quoteIdent(s string) string { return `"` + s + `"` } // s is validIdent

func unknownTable(name string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "PGRST205",
		Message: fmt.Sprintf("Could not find the table 'data_api.%s' in the schema cache", name),
		Hint:    "The tables are: " + strings.Join(TableNames(), ", ")}
}

func unknownColumn(table, col string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "42703", Message: fmt.Sprintf("column %s.%s does not exist", table, col)}
}

// build turns a parsed request into SQL over the allow-list.
func build(tableName string, r *Request, accountID string, maxRows int, wantCount bool, opts buildOptions) (*query, error) {
	t, ok := Tables[tableName]
	if !ok {
		return nil, unknownTable(tableName)
	}
	q := &query{table: t, args: []any{accountID}, offset: r.Offset}

	var sel strings.Builder
	if r.Select == nil {
		for i, c := range t.Columns {
			if i > 0 {
				sel.WriteString(", ")
			}
			sel.WriteString(quoteIdent(c.Name))
		}
	} else {
		seen := map[string]bool{}
		for _, name := range r.Select {
			if _, ok := t.column(name); !ok {
				return nil, unknownColumn(t.Name, name)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			if sel.Len() > 0 {
				sel.WriteString(", ")
			}
			sel.WriteString(quoteIdent(name))
		}
	}

	owner := t.Owner
	if opts.omitAccountFilter {
		owner = `$1::uuid IS NOT NULL` // always true: the filter is gone
	}
	where := []string{owner}
	for _, f := range r.Filters {
		c, ok := t.column(f.Column)
		if !ok {
			return nil, unknownColumn(t.Name, f.Column)
		}
		cond, err := filterSQL(c, f, &q.args)
		if err != nil {
			return nil, err
		}
		where = append(where, cond)
		q.fullText = q.fullText || tsQueries[f.Op] != ""
	}
	for _, l := range r.Logic {
		cond, err := logicSQL(t, l, &q.args)
		if err != nil {
			return nil, err
		}
		where = append(where, cond)
		q.fullText = q.fullText || l.hasFullText()
	}
	whereSQL := ""
	if len(where) > 0 {
		whereSQL = " WHERE " + strings.Join(where, " AND ")
	}

	var order strings.Builder
	for i, o := range r.Order {
		if _, ok := t.column(o.Column); !ok {
			return nil, unknownColumn(t.Name, o.Column)
		}
		if i == 0 {
			order.WriteString(" ORDER BY ")
		} else {
			order.WriteString(", ")
		}
		order.WriteString(quoteIdent(o.Column))
		if o.Desc {
			order.WriteString(" DESC")
		}
		if o.NullsFirst != nil {
			if *o.NullsFirst {
				order.WriteString(" NULLS FIRST")
			} else {
				order.WriteString(" NULLS LAST")
			}
		}
	}

	limit := maxRows
	if r.Limit != nil && *r.Limit < limit {
		limit = *r.Limit
	}
	from := " FROM data_api." + quoteIdent(t.Name)
	if wantCount {
		q.countSQL = "SELECT count(*)" + from + whereSQL
		q.count = append([]any(nil), q.args...)
	}
	q.args = append(q.args, limit, r.Offset)
	n := len(q.args)
	q.sql = "SELECT coalesce(json_agg(_t), '[]')::text, count(*) FROM (SELECT " + sel.String() + from + whereSQL + order.String() +
		" LIMIT $" + strconv.Itoa(n-1) + "::bigint OFFSET $" + strconv.Itoa(n) + "::bigint) _t"
	return q, nil
}

func (l Logic) hasFullText() bool {
	if l.Filter != nil {
		return tsQueries[l.Filter.Op] != ""
	}
	for _, c := range l.Children {
		if c.hasFullText() {
			return true
		}
	}
	return false
}

// logicSQL writes one node of or=/and=.
func logicSQL(t *Table, l Logic, args *[]any) (string, error) {
	if l.Filter != nil {
		c, ok := t.column(l.Filter.Column)
		if !ok {
			return "", unknownColumn(t.Name, l.Filter.Column)
		}
		return filterSQL(c, *l.Filter, args)
	}
	parts := make([]string, 0, len(l.Children))
	for _, child := range l.Children {
		cond, err := logicSQL(t, child, args)
		if err != nil {
			return "", err
		}
		parts = append(parts, cond)
	}
	join := " AND "
	if l.Or {
		join = " OR "
	}
	cond := "(" + strings.Join(parts, join) + ")"
	if l.Not {
		cond = "NOT " + cond
	}
	return cond, nil
}

func noOperator(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "42883", Message: fmt.Sprintf(format, args...),
		Hint: "No operator matches the given name and argument types."}
}

var (
	comparisons = map[Op]string{OpEq: "=", OpNeq: "<>", OpGt: ">", OpGte: ">=", OpLt: "<", OpLte: "<="}
	containment = map[Op]string{OpContains: "@>", OpContained: "<@", OpOverlap: "&&"}
	rangeOps    = map[Op]string{OpStrictlyLeft: "<<", OpStrictlyRight: ">>", OpNotExtendsRight: "&<",
		OpNotExtendsLeft: "&>", OpAdjacent: "-|-"}
	tsQueries = map[Op]string{OpFts: "to_tsquery", OpPlFts: "plainto_tsquery", OpPhFts: "phraseto_tsquery",
		OpWFts: "websearch_to_tsquery"}
)

// filterSQL writes one condition on an allow-listed column. Every value is
// a parameter, bound as text and cast in SQL to the column's type.
func filterSQL(c Column, f Filter, args *[]any) (string, error) {
	col := quoteIdent(c.Name)
	bind := func(v any, cast string) string {
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args)) + cast
	}
	isArray := strings.HasSuffix(c.Type, "[]")
	var cond string
	switch f.Op {
	case OpIs:
		if f.Value != "null" && f.Value != "not_null" && c.Type != "boolean" {
			return "", noOperator("operator does not exist: %s IS %s", c.Type, strings.ToUpper(f.Value))
		}
		cond = col + " IS " + strings.ToUpper(strings.ReplaceAll(f.Value, "_", " "))
	case OpIn:
		if isArray {
			return "", noOperator("operator does not exist: %s = ANY (list)", c.Type)
		}
		cond = col + " = ANY(" + bind(f.Values, "::text[]::"+c.Type+"[]") + ")"
	case OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte:
		sqlOp := comparisons[f.Op]
		if f.Quant == "" {
			cond = col + " " + sqlOp + " " + bind(f.Value, "::text::"+c.Type)
			break
		}
		if isArray {
			return "", noOperator("operator does not exist: %s %s %s(list)", c.Type, sqlOp, strings.ToUpper(f.Quant))
		}
		cond = col + " " + sqlOp + " " + strings.ToUpper(f.Quant) + "(" + bind(f.Value, "::text::"+c.Type+"[]") + ")"
	case OpLike, OpILike:
		sqlOp := map[Op]string{OpLike: "LIKE", OpILike: "ILIKE"}[f.Op]
		if c.Type != "text" {
			return "", noOperator("operator does not exist: %s %s text", c.Type, sqlOp)
		}
		// PostgREST's one rewrite of the pattern: * is %, so that a
		// pattern needs no percent-encoding. Everything else is LIKE's.
		pattern := strings.ReplaceAll(f.Value, "*", "%")
		if f.Quant == "" {
			cond = col + " " + sqlOp + " " + bind(pattern, "::text")
		} else {
			cond = col + " " + sqlOp + " " + strings.ToUpper(f.Quant) + "(" + bind(pattern, "::text::text[]") + ")"
		}
	case OpIsDistinct:
		cond = col + " IS DISTINCT FROM " + bind(f.Value, "::text::"+c.Type)
	case OpContains, OpContained, OpOverlap:
		sqlOp := containment[f.Op]
		switch {
		case isArray:
			cond = col + " " + sqlOp + " " + bind(f.Value, "::text::"+c.Type)
		case c.Type == "jsonb" && f.Op != OpOverlap:
			cond = col + " " + sqlOp + " " + bind(f.Value, "::text::jsonb")
		default:
			return "", noOperator("operator does not exist: %s %s unknown", c.Type, sqlOp)
		}
	case OpStrictlyLeft, OpStrictlyRight, OpNotExtendsRight, OpNotExtendsLeft, OpAdjacent:
		return "", noOperator("operator does not exist: %s %s unknown (no column of this API is a range)", c.Type, rangeOps[f.Op])
	case OpFts, OpPlFts, OpPhFts, OpWFts:
		if c.Type != "text" && c.Type != "jsonb" {
			return "", noOperator("function to_tsvector(%s) does not exist", c.Type)
		}
		fn := tsQueries[f.Op]
		if f.Lang == "" {
			cond = "to_tsvector(" + col + ") @@ " + fn + "(" + bind(f.Value, "::text") + ")"
		} else {
			lang := bind(f.Lang, "::text::regconfig")
			cond = "to_tsvector(" + lang + ", " + col + ") @@ " + fn + "(" + lang + ", " + bind(f.Value, "::text") + ")"
		}
	default:
		return "", unsupportedOp(f.Op, "not an operator of this API")
	}
	if f.Not {
		cond = "NOT (" + cond + ")"
	}
	return cond, nil
}
