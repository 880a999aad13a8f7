package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDomainInput: the domain routes' own parsers of outside input (the
// {domain} path value, DKIM selectors and tags) never panic, refuse with a
// 404 or a 422 naming the field, and what they accept is in canonical form
// (parsing it again changes nothing).
func FuzzDomainInput(f *testing.F) {
	for _, s := range []string{"example.com", "Bücher.Example.COM.", "b%C3%BCcher.example.com", "com", "a..b", "s1", "k1.mail",
		"-bad", "under_score", "UPPER", " padded ", "a\x00b", "\xff", strings.Repeat("a", 64), strings.Repeat("a.", 120), "%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		status := func(err error) int {
			var apiErr *Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("%q: not an API error: %v", s, err)
			}
			return apiErr.Status
		}

		if name, err := normalizeDomainPath(s); err != nil {
			if st := status(err); st != http.StatusNotFound {
				t.Fatalf("path %q: status %d", s, st)
			}
		} else {
			again, err := normalizeDomainPath(name)
			if err != nil || again != name {
				t.Fatalf("path %q -> %q -> %q, %v", s, name, again, err)
			}
		}

		if sels, err := cleanSelectors("dkim_selectors", []string{s, strings.ToUpper(s)}); err != nil {
			if st := status(err); st != http.StatusUnprocessableEntity {
				t.Fatalf("selector %q: status %d", s, st)
			}
		} else {
			if len(sels) != 1 {
				t.Fatalf("selector %q: case variants not merged: %q", s, sels)
			}
			if selectorProblem(sels[0]) != "" || sels[0] != strings.ToLower(sels[0]) || strings.TrimSpace(sels[0]) != sels[0] {
				t.Fatalf("selector %q accepted as %q", s, sels[0])
			}
			again, err := cleanSelectors("dkim_selectors", sels)
			if err != nil || !slices.Equal(again, sels) {
				t.Fatalf("selector %q not stable: %q -> %q, %v", s, sels, again, err)
			}
		}

		if tags, err := cleanTags("tags", []string{s, s}); err != nil {
			if st := status(err); st != http.StatusUnprocessableEntity {
				t.Fatalf("tag %q: status %d", s, st)
			}
		} else {
			if len(tags) != 1 || tags[0] == "" || len(tags[0]) > maxDomainTagLength || strings.TrimSpace(tags[0]) != tags[0] {
				t.Fatalf("tag %q accepted as %q", s, tags)
			}
			if utf8.ValidString(s) != utf8.ValidString(tags[0]) {
				t.Fatalf("tag %q changed validity: %q", s, tags[0])
			}
		}
	})
}
