package events

import (
	"bytes"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Rendered is the fields of an event's API representation, the JSON object
// stored in events.rendered when the event is emitted. Events are
// immutable, so listings send the stored bytes instead of decoding and
// re-encoding every column (a 2.6x difference for a 50-event page).
//
// Renderings are stored exactly as the API sends them: compact, with `<`,
// `>` and `&` written as they are (the API's encoder does not HTML-escape).
// Rows emitted before that (HTML-safe \u003c escapes) are tidied when read
// from the database (ListRendered), never on the serving path.
type Rendered struct {
	ID        uuid.UUID
	Type      string
	Payload   []byte // valid JSON object
	CreatedAt time.Time
	Severity  string
	Domain    *string
	Tags      []string
}

// AppendJSON appends r as the API's event object:
// {"id","event_type","payload","created_at","severity","domain","tags"}.
func (r *Rendered) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = r.AppendFields(dst)
	return append(dst, '}')
}

// AppendFields appends r's members without the braces, so a larger object
// (an alert) can extend them.
func (r *Rendered) AppendFields(dst []byte) []byte {
	dst = append(dst, `"id":"`...)
	dst = append(dst, r.ID.String()...)
	dst = append(dst, `","event_type":`...)
	dst = AppendJSONString(dst, r.Type)
	dst = append(dst, `,"payload":`...)
	if len(r.Payload) == 0 {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, r.Payload...)
	}
	dst = append(dst, `,"created_at":`...)
	dst = AppendJSONTime(dst, r.CreatedAt)
	dst = append(dst, `,"severity":`...)
	dst = AppendJSONString(dst, r.Severity)
	dst = append(dst, `,"domain":`...)
	dst = AppendJSONStringPtr(dst, r.Domain)
	dst = append(dst, `,"tags":[`...)
	for i, t := range r.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, t)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string exactly as the API's
// encoder (encoding/json with SetEscapeHTML(false)) writes it: <, > and &
// as they are, U+2028/U+2029 escaped, invalid UTF-8 replaced with U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONTime appends t as encoding/json does (RFC 3339 with nanoseconds).
func AppendJSONTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// AppendJSONStringPtr appends s, or null.
func AppendJSONStringPtr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return AppendJSONString(dst, *s)
}

// legacyEscape starts every escape that renderings stored before they were
// written unescaped may hold (\u003c, \u003e, \u0026).
var legacyEscape = []byte(`\u00`)

// asServed returns a stored rendering as the API sends it: as is, or,
// when it may hold HTML-safe escapes (rows emitted before renderings were
// stored unescaped, or a control character's escape), tidied in place.
func asServed(r []byte) []byte {
	if bytes.Contains(r, legacyEscape) {
		return TidyJSON(r)
	}
	return r
}

// TidyJSON rewrites a valid JSON text in place as the API's encoder would
// have written it: whitespace between tokens removed (jsonb renders
// payloads as {"a": 1}) and the \u003c, \u003e and \u0026 escapes of
// encoding/json's HTML-safe mode undone. Other escapes are kept. It is for
// JSON assembled from stored or encoded-elsewhere JSON.
func TidyJSON(b []byte) []byte {
	w, r, n := 0, 0, len(b)
	for r < n {
		c := b[r]
		switch c {
		case ' ', '\t', '\n', '\r':
			r++
			continue
		case '"':
		default:
			b[w] = c
			w, r = w+1, r+1
			continue
		}
		// A string: copy it through its closing quote, finding the quote and
		// the escapes with bytes.IndexByte (vectorised), undoing only the
		// HTML-safe escapes.
		b[w] = '"'
		w, r = w+1, r+1
		for r < n {
			end := bytes.IndexByte(b[r:], '"')
			if end < 0 {
				end = n - r
			}
			if esc := bytes.IndexByte(b[r:r+end], '\\'); esc >= 0 {
				end = esc
			}
			if w != r {
				copy(b[w:], b[r:r+end])
			}
			w, r = w+end, r+end
			if r >= n {
				break
			}
			if b[r] == '"' {
				b[w] = '"'
				w, r = w+1, r+1
				break
			}
			// A backslash: an HTML-safe \u00XY becomes its character, any
			// other escape pair is copied as is (so \\u003c stays).
			if r+6 <= n && b[r+1] == 'u' && b[r+2] == '0' && b[r+3] == '0' {
				if ch := htmlEscaped(b[r+4], b[r+5]); ch != 0 {
					b[w] = ch
					w, r = w+1, r+6
					continue
				}
			}
			if r+1 < n {
				b[w], b[w+1] = b[r], b[r+1]
				w, r = w+2, r+2
				continue
			}
			b[w] = b[r]
			w, r = w+1, r+1
		}
	}
	return b[:w]
}

// htmlEscaped returns the character of a \u00XY escape that HTML-safe
// encoding/json writes, or 0.
func htmlEscaped(x, y byte) byte {
	switch {
	case x == '3' && (y == 'c' || y == 'C'):
		return '<'
	case x == '3' && (y == 'e' || y == 'E'):
		return '>'
	case x == '2' && y == '6':
		return '&'
	}
	return 0
}
