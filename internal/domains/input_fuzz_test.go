package domains

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDomainInput: the domain rules' parsers of outside input (a domain
// name from a path, DKIM selectors and tags) never panic, refuse with
// ErrNotFound or a *FieldError naming the field, and what they accept is
// in canonical form (parsing it again changes nothing).
func FuzzDomainInput(f *testing.F) {
	for _, s := range []string{"example.com", "Bücher.Example.COM.", "bücher.example.com", "com", "a..b", "s1", "k1.mail",
		"-bad", "under_score", "UPPER", " padded ", "a\x00b", "\xff", strings.Repeat("a", 64), strings.Repeat("a.", 120), "%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fieldError := func(err error, field string) {
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, field) {
				t.Fatalf("%q: not a field error of %s: %v", s, field, err)
			}
		}

		if name, err := NormalizeName(s); err != nil {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("path %q: %v", s, err)
			}
		} else {
			again, err := NormalizeName(name)
			if err != nil || again != name {
				t.Fatalf("path %q -> %q -> %q, %v", s, name, again, err)
			}
		}

		if sels, err := CleanSelectors("dkim_selectors", []string{s, strings.ToUpper(s)}); err != nil {
			fieldError(err, "dkim_selectors")
		} else {
			if len(sels) != 1 {
				t.Fatalf("selector %q: case variants not merged: %q", s, sels)
			}
			if SelectorProblem(sels[0]) != "" || sels[0] != strings.ToLower(sels[0]) || strings.TrimSpace(sels[0]) != sels[0] {
				t.Fatalf("selector %q accepted as %q", s, sels[0])
			}
			again, err := CleanSelectors("dkim_selectors", sels)
			if err != nil || !slices.Equal(again, sels) {
				t.Fatalf("selector %q not stable: %q -> %q, %v", s, sels, again, err)
			}
		}

		if tags, err := CleanTags("tags", []string{s, s}); err != nil {
			fieldError(err, "tags")
		} else {
			if len(tags) != 1 || tags[0] == "" || len(tags[0]) > MaxTagLength || strings.TrimSpace(tags[0]) != tags[0] {
				t.Fatalf("tag %q accepted as %q", s, tags)
			}
			if utf8.ValidString(s) != utf8.ValidString(tags[0]) {
				t.Fatalf("tag %q changed validity: %q", s, tags[0])
			}
		}
	})
}
