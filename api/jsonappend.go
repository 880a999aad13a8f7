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

// jsonSizer is a JSONAppender that knows its body's size in advance.
type jsonSizer interface {
	jsonSize() int // 0: unknown
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
// are spaced.
func tidyFrom(b []byte, start int) []byte {
	return b[:start+len(tidyJSON(b[start:]))]
}

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

// jsonSize implements jsonSizer: the exact size of a page of stored
// renderings, so its body (and the final newline) is built in one buffer.
func (p *Page[T]) jsonSize() int {
	if p.raw == nil {
		return 0
	}
	n := 2 + max(len(p.raw)-1, 0) // brackets and commas
	for _, r := range p.raw {
		n += len(r)
	}
	return n
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
			// Stored renderings are exactly what the API sends (an older
			// row's escapes were undone when it was read: events.ListRendered).
			dst = append(dst, r...)
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
// written it (events.TidyJSON): for items assembled from jsonb columns.
func tidyJSON(b []byte) []byte { return events.TidyJSON(b) }
