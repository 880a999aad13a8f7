// Package pgtext checks and cleans text from outside input for Postgres,
// which stores neither a NUL character in text (nor in jsonb, which also
// refuses a \u0000 escape and a lone UTF-16 surrogate escape) nor invalid
// UTF-8 in a UTF-8 database. Text is checked (and refused) or cleaned where
// it enters, so it never fails a statement that also carries other work.
// The package has no dependencies, so parsers that know nothing of the
// database use it too.
package pgtext

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrNUL is text holding a NUL character.
var ErrNUL = errors.New("contains a NUL character, which cannot be stored")

// ErrUTF8 is text that is not valid UTF-8.
var ErrUTF8 = errors.New("is not valid UTF-8")

// ErrSurrogate is raw JSON holding a \u escape of a lone UTF-16
// surrogate, which jsonb refuses.
var ErrSurrogate = errors.New(`contains a \u escape of a lone UTF-16 surrogate, which cannot be stored`)

// Check returns ErrNUL or ErrUTF8 when s cannot be stored in a
// text column, else nil.
func Check(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return ErrNUL
	}
	if !utf8.ValidString(s) {
		return ErrUTF8
	}
	return nil
}

// Clean returns s as a text column can store it: every NUL character
// and every invalid UTF-8 sequence becomes U+FFFD. Text that needs no
// change is returned as is, without copying.
func Clean(s string) string {
	if Check(s) == nil {
		return s
	}
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	return strings.ReplaceAll(s, "\x00", string(utf8.RuneError))
}

// CheckJSON returns an error when raw JSON holds text that a jsonb
// column refuses: a \u0000 escape (ErrNUL), a lone surrogate escape
// (ErrSurrogate) or invalid UTF-8 (ErrUTF8). It reads only escapes
// and does not check that raw is JSON.
func CheckJSON(raw []byte) error {
	if !utf8.Valid(raw) {
		return ErrUTF8
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == 0 {
			return ErrNUL
		}
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		i++ // the escaped character
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw[i+1:])
		if !ok {
			continue
		}
		i += 4
		switch {
		case r == 0:
			return ErrNUL
		case r >= 0xDC00 && r <= 0xDFFF:
			return ErrSurrogate // a low surrogate without its high one
		case r >= 0xD800 && r <= 0xDBFF:
			// A high surrogate must be followed by an escaped low one.
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return ErrSurrogate
			}
			lo, ok := hex4(raw[i+3:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return ErrSurrogate
			}
			i += 6
		}
	}
	return nil
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
