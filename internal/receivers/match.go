package receivers

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mailwatch/mailwatch/internal/inbound"
)

// Bounds of a matching wait (docs/features/receivers.md). The API declares
// the same numbers on its query parameters.
const (
	// MaxFilterChars bounds from, to, subject_contains, body_contains and
	// a header filter's value, in characters.
	MaxFilterChars = 256
	// MaxHeaderNameChars bounds a header filter's name (RFC 5322 advises
	// lines of at most 78 characters).
	MaxHeaderNameChars = 76
	// MaxHeaderFilterChars bounds one header=Name:Value parameter.
	MaxHeaderFilterChars = MaxHeaderNameChars + 1 + MaxFilterChars
	// MaxHeaderFilters bounds the header filters of one wait.
	MaxHeaderFilters = 10
	// MaxCount bounds count, the matching messages a wait collects.
	MaxCount = 50
	// BodyExaminedBytes is how much of the text part and of the HTML part
	// (each, as stored) body_contains looks at.
	BodyExaminedBytes = 256 << 10
	// MaxLabelReceivers bounds the live receivers a label-wide wait watches.
	MaxLabelReceivers = 100
)

// FilterError is a filter value a wait refuses; Param names the query
// parameter.
type FilterError struct {
	Param, Reason string
}

func (e *FilterError) Error() string { return e.Param + " " + e.Reason }

// HeaderFilter asks for a header: Name compared case-insensitively, Value
// equal after trimming surrounding white space; an empty Value asks only
// that the header be present.
type HeaderFilter struct {
	Name, Value string
}

// Match is what a matching wait waits for: Count messages (1 when zero)
// that pass every filter given. An empty filter passes every message.
type Match struct {
	// From is the From address (the envelope sender when the message has no
	// From, the sender's number for an SMS); To is any To or Cc address or
	// envelope recipient. An address compares its local part exactly and its
	// domain case-insensitively; a value "@example.com" matches any address
	// of the domain; a value without "@" (a phone number) compares exactly.
	From, To string
	// SubjectContains and BodyContains are case-insensitive substrings.
	// BodyContains looks at the first BodyExaminedBytes of the text part
	// and of the HTML part (markup included).
	SubjectContains, BodyContains string
	Headers                       []HeaderFilter
	Count                         int
	// Since, when set, skips messages received before it. When neither
	// Since nor the wait's After is set, only messages that arrive after
	// the wait started count.
	Since *time.Time
}

// ParseHeaderFilter reads one header=Name:Value parameter.
func ParseHeaderFilter(s string) (HeaderFilter, error) {
	if utf8.RuneCountInString(s) > MaxHeaderFilterChars {
		return HeaderFilter{}, &FilterError{"header", fmt.Sprintf("must be at most %d characters", MaxHeaderFilterChars)}
	}
	name, value, ok := strings.Cut(s, ":")
	if !ok {
		return HeaderFilter{}, &FilterError{"header", "must be Name:Value (the value may be empty: the header is present)"}
	}
	name = strings.TrimSpace(name)
	if name == "" || len(name) > MaxHeaderNameChars {
		return HeaderFilter{}, &FilterError{"header", fmt.Sprintf("name must be 1 to %d characters", MaxHeaderNameChars)}
	}
	for i := 0; i < len(name); i++ {
		// RFC 5322 field names: printable US-ASCII except the colon.
		if c := name[i]; c < 33 || c > 126 {
			return HeaderFilter{}, &FilterError{"header", fmt.Sprintf("name %q holds a character a header name cannot have", name)}
		}
	}
	return HeaderFilter{Name: name, Value: strings.TrimSpace(value)}, nil
}

// Validate checks the bounds of m (the API checks them too; other callers
// rely on this).
func (m *Match) Validate() error {
	for _, f := range []struct{ param, v string }{
		{"from", m.From}, {"to", m.To}, {"subject_contains", m.SubjectContains}, {"body_contains", m.BodyContains},
	} {
		if utf8.RuneCountInString(f.v) > MaxFilterChars {
			return &FilterError{f.param, fmt.Sprintf("must be at most %d characters", MaxFilterChars)}
		}
		if !utf8.ValidString(f.v) {
			return &FilterError{f.param, "must be UTF-8"}
		}
	}
	if len(m.Headers) > MaxHeaderFilters {
		return &FilterError{"header", fmt.Sprintf("may be given at most %d times", MaxHeaderFilters)}
	}
	for _, h := range m.Headers {
		if utf8.RuneCountInString(h.Value) > MaxFilterChars {
			return &FilterError{"header", fmt.Sprintf("value must be at most %d characters", MaxFilterChars)}
		}
		if _, err := ParseHeaderFilter(h.Name + ":"); err != nil {
			return err
		}
	}
	if m.Count < 0 || m.Count > MaxCount {
		return &FilterError{"count", fmt.Sprintf("must be 1 to %d", MaxCount)}
	}
	return nil
}

// want is the number of matching messages the wait collects.
func (m *Match) want() int { return max(m.Count, 1) }

// Matches says whether msg passes every filter of m.
func (m *Match) Matches(msg *Message) bool {
	if m.Since != nil && msg.ReceivedAt.Before(*m.Since) {
		return false
	}
	if m.From != "" && !addressMatches(m.From, fromOf(msg)) {
		return false
	}
	if m.To != "" && !toMatches(m.To, msg) {
		return false
	}
	if m.SubjectContains != "" && !containsFold(msg.Subject, m.SubjectContains) {
		return false
	}
	if m.BodyContains != "" && !containsFold(prefix(msg.TextBody), m.BodyContains) &&
		!containsFold(prefix(msg.HTMLBody), m.BodyContains) {
		return false
	}
	for _, h := range m.Headers {
		if !headerMatches(h, msg) {
			return false
		}
	}
	return true
}

func fromOf(msg *Message) string {
	if msg.Details.From.Address != "" {
		return msg.Details.From.Address
	}
	return msg.Sender
}

func toMatches(want string, msg *Message) bool {
	for _, list := range [][]inbound.Address{msg.Details.To, msg.Details.Cc} {
		for _, a := range list {
			if addressMatches(want, a.Address) {
				return true
			}
		}
	}
	for _, a := range msg.Details.Recipients {
		if addressMatches(want, a) {
			return true
		}
	}
	return false
}

// addressMatches compares an address filter with an address: the local
// part exactly, the domain case-insensitively; "@domain" matches the whole
// domain; a value without "@" compares exactly.
func addressMatches(want, got string) bool {
	wl, wd, wok := cutLast(strings.TrimSpace(want))
	gl, gd, gok := cutLast(strings.TrimSpace(got))
	if !wok || !gok {
		return wok == gok && strings.TrimSpace(want) == strings.TrimSpace(got)
	}
	return strings.EqualFold(wd, gd) && (wl == "" || wl == gl)
}

func cutLast(a string) (local, domain string, ok bool) {
	i := strings.LastIndexByte(a, '@')
	if i < 0 {
		return a, "", false
	}
	return a[:i], a[i+1:], true
}

func headerMatches(f HeaderFilter, msg *Message) bool {
	for _, h := range msg.Details.Headers {
		if strings.EqualFold(h.Name, f.Name) && (f.Value == "" || strings.TrimSpace(h.Value) == f.Value) {
			return true
		}
	}
	return false
}

// prefix is the part of a body body_contains looks at.
func prefix(s string) string {
	if len(s) <= BodyExaminedBytes {
		return s
	}
	return s[:BodyExaminedBytes]
}

// containsFold reports whether sub is in s, ignoring case (Unicode simple
// folding, rune by rune).
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	first, _ := utf8.DecodeRuneInString(sub)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if equalFoldRune(r, first) && hasPrefixFold(s[i:], sub) {
			return true
		}
		i += size
	}
	return false
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		r1, n1 := utf8.DecodeRuneInString(s)
		r2, n2 := utf8.DecodeRuneInString(prefix)
		if !equalFoldRune(r1, r2) {
			return false
		}
		s, prefix = s[n1:], prefix[n2:]
	}
	return true
}

func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return 'A' <= a && a <= 'Z' && a+'a'-'A' == b || 'A' <= b && b <= 'Z' && b+'a'-'A' == a
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}
