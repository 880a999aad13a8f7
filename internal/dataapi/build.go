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

func filterSQL(c Column, f Filter, args *[]any) (string, error) {
	col := quoteIdent(c.Name)
	var cond string
	switch f.Op {
	case OpIs:
		cond = col + " IS " + strings.ToUpper(f.Value)
		if f.Not {
			cond = col + " IS NOT " + strings.ToUpper(f.Value)
		}
		if f.Value != "null" && c.Type != "boolean" {
			return "", &Error{Status: http.StatusBadRequest, Code: "42883",
				Message: fmt.Sprintf("operator does not exist: %s IS %s", c.Type, strings.ToUpper(f.Value))}
		}
		return cond, nil
	case OpIn:
		if strings.HasSuffix(c.Type, "[]") {
			return "", &Error{Status: http.StatusBadRequest, Code: "42883", Message: fmt.Sprintf("operator does not exist: %s = ANY (list)", c.Type)}
		}
		*args = append(*args, f.Values)
		cond = col + " = ANY($" + strconv.Itoa(len(*args)) + "::text[]::" + c.Type + "[])"
	default:
		sqlOp := map[Op]string{OpEq: "=", OpNeq: "<>", OpGt: ">", OpGte: ">=", OpLt: "<", OpLte: "<="}[f.Op]
		*args = append(*args, f.Value)
		cond = col + " " + sqlOp + " $" + strconv.Itoa(len(*args)) + "::text::" + c.Type
	}
	if f.Not {
		cond = "NOT (" + cond + ")"
	}
	return cond, nil
}
