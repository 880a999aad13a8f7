package dataapi

import (
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
// builder accepts or rejects, or is refused with a PostgREST parse error,
// and that only allow-listed identifiers ever reach the SQL.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"select=id,event_type&order=created_at.desc&limit=50",
		"event_type=in.(a,\"b,c\")&acknowledged_at=not.is.null",
		"created_at=gt.2026-01-01&offset=5",
		"id=eq.0193a1b2-0000-7000-8000-000000000000",
		"order=created_at.asc.nullsfirst,id.desc",
		"name=in.()", "x=eq.%00", "select=*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := Parse(raw)
		if err != nil {
			var e *Error
			if !errorAs(err, &e) || e.Status < 400 {
				t.Fatalf("Parse(%q) returned %v", raw, err)
			}
			return
		}
		q, err := build("events", r, "0193a1b2-0000-7000-8000-000000000000", 100, true, buildOptions{})
		if err != nil {
			var e *Error
			if !errorAs(err, &e) {
				t.Fatalf("build(%q) returned %v", raw, err)
			}
			return
		}
		for _, f := range r.Filters {
			if !validIdent(f.Column) {
				t.Fatalf("column %q reached the SQL", f.Column)
			}
		}
		if strings.Count(q.sql, "$") != len(q.args) && !strings.Contains(q.sql, "$1::uuid") {
			t.Fatalf("placeholders do not match args in %q", q.sql)
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
