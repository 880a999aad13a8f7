package dataapi

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	r, err := Parse("select=id,event_type&event_type=in.(a,%22b,c%22,%22q%5C%22x%22)&created_at=gte.2026-01-01T00:00:00Z" +
		"&acknowledged_at=not.is.null&order=created_at.desc.nullslast,id&limit=10&offset=20")
	require.NoError(t, err)
	require.Equal(t, []string{"id", "event_type"}, r.Select)
	require.Equal(t, 10, *r.Limit)
	require.Equal(t, 20, r.Offset)
	require.Len(t, r.Order, 2)
	require.True(t, r.Order[0].Desc)
	require.False(t, *r.Order[0].NullsFirst)
	require.Equal(t, []Filter{
		{Column: "acknowledged_at", Op: OpIs, Not: true, Value: "null"},
		{Column: "created_at", Op: OpGte, Value: "2026-01-01T00:00:00Z"},
		{Column: "event_type", Op: OpIn, Values: []string{"a", "b,c", `q"x`}},
	}, r.Filters)

	r, err = Parse("select=*&name=eq.a.b.c")
	require.NoError(t, err)
	require.Nil(t, r.Select)
	require.Equal(t, "a.b.c", r.Filters[0].Value, "only the first dot separates the operator")

	for _, bad := range []string{
		"select=id,author(name)", "select=x:id", "select=id::text", "name=lke.a*", "name=eq", "name=is.maybe",
		"name=in.a,b", `name=in.("a)`, "order=name.sideways", "limit=-1", "limit=x", "offset=1&offset=2",
		"Name=eq.x", "na%20me=eq.x", "order=a.b.c.d", "name=in.(\"a\"b)",
		"x=" + strings.Repeat("a", MaxQueryBytes),
		strings.Repeat("a=eq.1&", MaxFilters+1),
	} {
		_, err := Parse(bad)
		var e *Error
		require.ErrorAs(t, err, &e, bad)
		require.Equal(t, "PGRST100", e.Code, bad)
	}
}

// FuzzParse checks that any query string either parses into a request the
// builder accepts or rejects, or is refused with a PostgREST parse error;
// that a parse stays within the nesting and condition bounds; and that the
// SQL names only allow-listed identifiers and binds every value, with one
// argument per placeholder.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"select=id,event_type&order=created_at.desc&limit=50",
		"event_type=in.(a,\"b,c\")&acknowledged_at=not.is.null",
		"created_at=gt.2026-01-01&offset=5",
		"id=eq.0193a1b2-0000-7000-8000-000000000000",
		"order=created_at.asc.nullsfirst,id.desc",
		"name=in.()", "x=eq.%00", "select=*",
		"domain=like.*shop*&name=ilike(any).{a*,b*}&tags=cs.{prod}&payload=cd.{\"a\":1}",
		"or=(event_type.eq.a,and(domain.is.null,not.or(tags.ov.{x},payload.fts(english).b)))",
		"not.and=(domain.in.(\"a,b\",c),score.gte(all).{1,2})&domain=not.isdistinct.x",
		"payload=wfts.quick%20-fox&tags=sl.(1,2)&name=match.x",
		"or=(a.eq.\"x\\\"y\",b.like.{q})",
	} {
		f.Add(s)
	}
	placeholder := regexp.MustCompile(`\$([0-9]+)`)
	ident := regexp.MustCompile(`"([^"]*)"`)
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := Parse(raw)
		if err != nil {
			var e *Error
			if !errorAs(err, &e) || e.Status < 400 {
				t.Fatalf("Parse(%q) returned %v", raw, err)
			}
			return
		}
		conditions := len(r.Filters)
		var walk func(l Logic, depth int)
		walk = func(l Logic, depth int) {
			if l.Filter != nil {
				conditions++
				return
			}
			if depth > MaxLogicDepth || len(l.Children) == 0 {
				t.Fatalf("Parse(%q): a group %d deep with %d conditions", raw, depth, len(l.Children))
			}
			for _, c := range l.Children {
				walk(c, depth+1)
			}
		}
		for _, l := range r.Logic {
			walk(l, 1)
		}
		if conditions > MaxFilters {
			t.Fatalf("Parse(%q): %d conditions", raw, conditions)
		}
		for _, table := range []string{"events", "domains", "messages"} {
			q, err := build(table, r, "0193a1b2-0000-7000-8000-000000000000", 100, true, buildOptions{})
			if err != nil {
				var e *Error
				if !errorAs(err, &e) || e.Status < 400 {
					t.Fatalf("build(%s, %q) returned %v", table, raw, err)
				}
				continue
			}
			for _, sql := range []string{q.sql, q.countSQL} {
				for _, m := range ident.FindAllStringSubmatch(sql, -1) {
					if _, ok := Tables[table].column(m[1]); !ok && m[1] != table {
						t.Fatalf("%q reached the SQL of %q: %s", m[1], raw, sql)
					}
				}
			}
			used := map[string]bool{}
			for _, m := range placeholder.FindAllStringSubmatch(q.sql, -1) {
				used[m[1]] = true
			}
			if len(used) != len(q.args) {
				t.Fatalf("%d placeholders for %d arguments in %s", len(used), len(q.args), q.sql)
			}
			for i := 1; i <= len(q.args); i++ {
				if !used[strconv.Itoa(i)] {
					t.Fatalf("$%d unused in %s", i, q.sql)
				}
			}
		}
	})
}

func errorAs(err error, e **Error) bool {
	v, ok := err.(*Error)
	if ok {
		*e = v
	}
	return ok
}

// TestParseFilterGrammar reads the query strings postgrest-js and
// supabase-js produce for each filter method, and refuses what PostgREST
// refuses (or what this API does not serve) with PGRST100.
func TestParseFilterGrammar(t *testing.T) {
	t.Parallel()
	one := func(t *testing.T, raw string) *Request {
		t.Helper()
		r, err := Parse(raw)
		require.NoError(t, err, raw)
		return r
	}
	// Pattern values are kept as sent: * becomes % only in the SQL.
	r := one(t, "domain=like.100%25%5C_off*&event_type=not.ilike.*SPIKE")
	require.Equal(t, []Filter{
		{Column: "domain", Op: OpLike, Value: `100%\_off*`},
		{Column: "event_type", Op: OpILike, Not: true, Value: "*SPIKE"},
	}, r.Filters)

	r = one(t, "domain=like(any).%7Bshop*,blog*%7D&tags=cs.%7Bprod%7D&payload=cd.%7B%22a%22:1%7D&tags=ov.%7Beu,us%7D"+
		"&domain=isdistinct.x&domain=wfts(english).quick%20fox&acknowledged_at=is.NOT_NULL")
	require.Equal(t, []Filter{
		{Column: "acknowledged_at", Op: OpIs, Value: "not_null"},
		{Column: "domain", Op: OpLike, Quant: "any", Value: "{shop*,blog*}"},
		{Column: "domain", Op: OpIsDistinct, Value: "x"},
		{Column: "domain", Op: OpWFts, Lang: "english", Value: "quick fox"},
		{Column: "payload", Op: OpContained, Value: `{"a":1}`},
		{Column: "tags", Op: OpContains, Value: "{prod}"},
		{Column: "tags", Op: OpOverlap, Value: "{eu,us}"},
	}, r.Filters)

	// or=/and= trees, as .or() writes them, nested and negated.
	r = one(t, `or=(event_type.eq.dmarc_failure,domain.ilike.*BLOG*)&not.and=(tags.cs.{a,b},domain.in.(x,"y,)z"),`+
		`or(domain.is.null,not.and(event_type.eq."q,\"r",severity.neq.info)))`)
	require.Len(t, r.Logic, 2)
	require.Equal(t, Logic{Not: true, Children: []Logic{
		{Filter: &Filter{Column: "tags", Op: OpContains, Value: "{a,b}"}},
		{Filter: &Filter{Column: "domain", Op: OpIn, Values: []string{"x", "y,)z"}}},
		{Or: true, Children: []Logic{
			{Filter: &Filter{Column: "domain", Op: OpIs, Value: "null"}},
			{Not: true, Children: []Logic{
				{Filter: &Filter{Column: "event_type", Op: OpEq, Value: `q,"r`}},
				{Filter: &Filter{Column: "severity", Op: OpNeq, Value: "info"}},
			}},
		}},
	}}, r.Logic[0], "keys in order: not.and before or")
	require.Equal(t, Logic{Or: true, Children: []Logic{
		{Filter: &Filter{Column: "event_type", Op: OpEq, Value: "dmarc_failure"}},
		{Filter: &Filter{Column: "domain", Op: OpILike, Value: "*BLOG*"}},
	}}, r.Logic[1])

	// Spaces around a group's items, as people type them; a value keeps its own.
	r = one(t, "or=(%20a.eq.1%20,%20b.eq.x%20y)")
	require.Equal(t, "1 ", r.Logic[0].Children[0].Filter.Value)
	require.Equal(t, "x y", r.Logic[0].Children[1].Filter.Value)

	deep := "or=(" + strings.Repeat("and(", MaxLogicDepth-1) + "a.eq.1" + strings.Repeat(")", MaxLogicDepth-1) + ")"
	one(t, deep)
	many := "or=(" + strings.TrimSuffix(strings.Repeat("a.eq.1,", MaxFilters), ",") + ")"
	one(t, many)

	for _, bad := range []string{
		"or=a.eq.1", "or=()", "or=(a.eq.1", "or=(a.eq.1)x", "or=(a.eq.1,)", "or=(A.eq.1)", "or=(a.eqq.1)",
		"or=(a.in.1,2)", "or=(xor(a.eq.1))", "domains.or=(a.eq.1)", "and=(a)",
		"name=neq(any).{a}", "name=in(any).(a)", "name=fts(bad-lang).x", "name=fts(.x", "name=like",
		"name=is.not null",
		"or=(" + strings.Repeat("and(", MaxLogicDepth) + "a.eq.1" + strings.Repeat(")", MaxLogicDepth) + ")",
		"or=(" + strings.TrimSuffix(strings.Repeat("a.eq.1,", MaxFilters+1), ",") + ")",
		"a=eq.1&or=(" + strings.TrimSuffix(strings.Repeat("a.eq.1,", MaxFilters), ",") + ")",
		"name=eq(any).{" + strings.Repeat("a,", MaxInValues) + "a}",
		"tags=cs.{" + strings.Repeat("a,", MaxInValues) + "a}", // array lists are bounded like in.()
		"tags=ov.{" + strings.Repeat("a,", MaxInValues) + "a}",
	} {
		_, err := Parse(bad)
		var e *Error
		require.ErrorAs(t, err, &e, bad)
		require.Equal(t, "PGRST100", e.Code, bad)
		require.Equal(t, 400, e.Status, bad)
	}

	// Regular expressions are refused by name, wherever they appear.
	for _, raw := range []string{"name=match.^a", "name=not.imatch.a", "or=(name.match.a,name.eq.b)", "name=match(any).{a}"} {
		_, err := Parse(raw)
		var e *Error
		require.ErrorAs(t, err, &e, raw)
		require.Equal(t, "PGRST100", e.Code, raw)
		require.Contains(t, e.Message, "match", raw)
		require.Contains(t, e.Details, "like or ilike", raw)
	}
}
