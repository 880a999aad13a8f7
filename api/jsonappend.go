package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mailwatch/mailwatch/internal/events"
)

// JSONAppender is a response that writes its own JSON body. Hot listings
// use it: encoding/json re-validates every embedded raw payload, which
// cost more than everything else in GET /events.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

func (e *Event) rendered() events.Rendered {
	return events.Rendered{ID: e.ID, Type: e.EventType, Payload: e.Payload, CreatedAt: e.CreatedAt,
		Severity: e.Severity, Domain: e.Domain, Tags: e.Tags}
}

// AppendJSON implements JSONAppender.
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	r := e.rendered()
	start := len(dst)
	return tidyFrom(r.AppendJSON(dst), start), nil
}

// tidyFrom tidies b[start:] (see tidyJSON): payloads read back from jsonb
// are spaced, and events' string encoder is HTML-safe.
func tidyFrom(b []byte, start int) []byte {
	return b[:start+len(tidyJSON(b[start:]))]
}

// htmlSafeEscape is the start of every escape tidyJSON undoes.
var htmlSafeEscape = []byte(`\u00`)

// AppendJSON implements JSONAppender (shadowing the embedded Event's).
func (a *Alert) AppendJSON(dst []byte) ([]byte, error) {
	r := a.Event.rendered()
	start := len(dst)
	dst = append(dst, '{')
	dst = r.AppendFields(dst)
	dst = append(dst, `,"acknowledged":`...)
	if a.Acknowledged {
		dst = append(dst, "true"...)
	} else {
		dst = append(dst, "false"...)
	}
	dst = append(dst, `,"acknowledged_by":`...)
	dst = events.AppendJSONStringPtr(dst, a.AcknowledgedBy)
	dst = append(dst, `,"acknowledged_at":`...)
	if a.AcknowledgedAt == nil {
		dst = append(dst, "null"...)
	} else {
		dst = events.AppendJSONTime(dst, *a.AcknowledgedAt)
	}
	dst = append(dst, `,"note":`...)
	dst = events.AppendJSONStringPtr(dst, a.Note)
	dst = append(dst, `,"acknowledged_key_identifier":`...)
	dst = events.AppendJSONStringPtr(dst, a.AcknowledgedKeyIdentifier)
	return tidyFrom(append(dst, '}'), start), nil
}

// AppendJSON implements JSONAppender: the body is the items array. Items
// stored pre-rendered are copied as they are; items that write their own
// JSON do; others go through encoding/json.
func (p *Page[T]) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '[')
	if p.raw != nil {
		for i, r := range p.raw {
			if i > 0 {
				dst = append(dst, ',')
			}
			// Stored renderings are compact; only encoding/json's HTML-safe
			// escapes, rare, need undoing.
			start := len(dst)
			dst = append(dst, r...)
			if bytes.Contains(r, htmlSafeEscape) {
				dst = tidyFrom(dst, start)
			}
		}
		return append(dst, ']'), nil
	}
	for i := range p.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if a, ok := any(&p.Items[i]).(JSONAppender); ok {
			dst, err = a.AppendJSON(dst)
		} else {
			var b []byte
			b, err = encodeJSON(&p.Items[i])
			dst = append(dst, bytes.TrimSuffix(b, []byte("\n"))...)
		}
		if err != nil {
			return nil, fmt.Errorf("error encoding item %d: %w", i, err)
		}
	}
	return append(dst, ']'), nil
}

// encodeJSON is the API's one JSON encoder: Fiber's JSONEncoder (every
// c.JSON, error bodies included) and the typed endpoints use it. It writes
// `<`, `>` and `&` as they are (responses are never embedded in HTML) and
// ends the body with a newline, so responses read well in a terminal.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tidyJSON rewrites a valid JSON text in place as encodeJSON would have
// written it: whitespace between tokens removed (jsonb renders payloads
// as {"a": 1}) and the \u003c, \u003e and \u0026 escapes of encoding/json's
// HTML-safe mode undone (stored event renderings have them). Other escapes
// are kept. It is for items assembled from stored JSON (JSONAppender).
func tidyJSON(b []byte) []byte {
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
