package domains

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/mailwatch/mailwatch/internal/domainname"
)

// Limits of a domain's lists.
const (
	MaxTags          = 20
	MaxTagLength     = 64
	MaxDKIMSelectors = 20
)

// FieldError is a refused input value, naming the field ("tags[2]").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// NormalizeName turns any spelling of a monitored domain's name (Unicode,
// upper case, a trailing dot) into the stored one. A name that cannot
// normalise can never be monitored, so it is ErrNotFound.
func NormalizeName(raw string) (string, error) {
	name, err := domainname.Normalize(raw)
	if err != nil {
		return "", ErrNotFound
	}
	return name, nil
}

// CleanTags trims, de-duplicates and checks tags; a refused one is a
// *FieldError naming field[i] (or field when there are too many).
func CleanTags(field string, tags []string) ([]string, error) {
	out := make([]string, 0, len(tags))
	for i, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), "must not be blank"}
		}
		if len(t) > MaxTagLength {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("must be at most %d characters", MaxTagLength)}
		}
		if strings.IndexFunc(t, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), "must not contain control characters"}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > MaxTags {
		return nil, &FieldError{field, fmt.Sprintf("must have at most %d items", MaxTags)}
	}
	return out, nil
}

// CleanSelectors lower-cases, de-duplicates and checks DKIM selectors: a
// selector is one or more dot-separated labels of letters, digits and
// hyphens (RFC 6376 section 3.1), not starting or ending with a hyphen.
// A refused one is a *FieldError.
func CleanSelectors(field string, sels []string) ([]string, error) {
	out := make([]string, 0, len(sels))
	for i, s := range sels {
		s = strings.ToLower(strings.TrimSpace(s))
		if msg := SelectorProblem(s); msg != "" {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), msg}
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > MaxDKIMSelectors {
		return nil, &FieldError{field, fmt.Sprintf("must have at most %d items", MaxDKIMSelectors)}
	}
	return out, nil
}

// SelectorProblem says what is wrong with a lower-cased, trimmed DKIM
// selector; "" when nothing is.
func SelectorProblem(s string) string {
	if s == "" {
		return "must not be blank"
	}
	if len(s) > 200 {
		return "must be at most 200 characters"
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return "must not have empty labels (two dots, or a leading or trailing dot)"
		}
		if len(label) > 63 {
			return "labels must be at most 63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "labels must not start or end with a hyphen"
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Sprintf("may contain only letters, digits, hyphens and dots, not %q", c)
			}
		}
	}
	return ""
}
