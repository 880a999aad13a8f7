package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// fuzzBody has every kind of field request bodies use.
type fuzzBody struct {
	Email  string            `json:"email"`
	Count  *int              `json:"count"`
	Flag   bool              `json:"flag"`
	Tags   []string          `json:"tags"`
	Nested map[string]string `json:"nested"`
}

// FuzzDecodeJSON: any body decodes or fails as a 400/422 API error, never
// a panic or another kind of error.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"email":"a@b.c","count":3,"flag":true,"tags":["x"],"nested":{"a":"b"}}`,
		`{"email":5}`, `[`, `{"unknown":1}`, `{} {}`, `null`, `"str"`, `{"count":1e400}`, "{\"email\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var dst fuzzBody
		err := decodeJSON(body, &dst)
		if err == nil {
			return
		}
		var apiErr *Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("non-API error %T: %v", err, err)
		}
		if apiErr.Status != http.StatusBadRequest && apiErr.Status != http.StatusUnprocessableEntity {
			t.Fatalf("status %d for %q", apiErr.Status, body)
		}
		if apiErr.Detail == "" {
			t.Fatal("empty detail")
		}
	})
}

// FuzzSetScalar: query and path values parse or fail cleanly, and what
// parses round-trips.
func FuzzSetScalar(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "200", "9223372036854775808", "true", "maybe", "2026-01-02T15:04:05Z",
		"yesterday", "018f5b6e-7c8a-7def-8abc-0123456789ab", "not-a-uuid"} {
		f.Add(s)
	}
	targets := []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[int](), reflect.TypeFor[*int](), reflect.TypeFor[bool](),
		reflect.TypeFor[*time.Time](), reflect.TypeFor[uuid.UUID](), reflect.TypeFor[*uuid.UUID]()}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, typ := range targets {
			v := reflect.New(typ).Elem()
			if err := setScalar(v, raw); err != nil {
				if err.Error() == "" {
					t.Fatal("empty error")
				}
				continue
			}
			if typ == reflect.TypeFor[string]() && v.String() != raw {
				t.Fatalf("string changed: %q -> %q", raw, v.String())
			}
		}
	})
}

// FuzzNormalizeEmail: accepted addresses are lower-case, trimmed, valid
// UTF-8 and stable under a second normalisation.
func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{"a@b.co", " Alice@Example.COM ", "bob", "x@localhost", "Bob <b@c.de>", "\"quoted\"@ex.com", "a@[127.0.0.1]", "é@exämple.de"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := normalizeEmail("email", raw)
		if err != nil {
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got != strings.ToLower(got) || got != strings.TrimSpace(got) || !utf8.ValidString(got) || !strings.Contains(got, "@") {
			t.Fatalf("bad normalisation %q -> %q", raw, got)
		}
		again, err := normalizeEmail("email", got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q (%v)", got, again, err)
		}
	})
}

func TestCheckText(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type req struct {
		Label   *string         `json:"label"`
		Tags    []string        `json:"tags"`
		Payload json.RawMessage `json:"payload"`
		Nested  inner           `json:"nested"`
		Query   string          `query:"q"`
	}
	ok := "fine"
	for _, tc := range []struct {
		name  string
		in    req
		field string
	}{
		{"Clean", req{Label: &ok, Tags: []string{"a"}, Payload: json.RawMessage(`{"a":"\\\\u0000 is text"}`), Nested: inner{"n"}, Query: "é"}, ""},
		{"NULInPointer", req{Label: ptr("a\x00")}, "label"},
		{"NULInSlice", req{Tags: []string{"ok", "b\x00"}}, "tags[1]"},
		{"NULEscapeInRawJSON", req{Payload: json.RawMessage(`{"k":"a\u0000"}`)}, "payload"},
		{"NULInNested", req{Nested: inner{"x\x00"}}, "nested.name"},
		{"InvalidUTF8InQuery", req{Query: "\xff"}, "q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkText(reflect.ValueOf(tc.in), "")
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || apiErr.Fields[0].Field != tc.field {
				t.Fatalf("got %v, want a 422 on %s", err, tc.field)
			}
		})
	}
}

func ptr(s string) *string { return &s }
