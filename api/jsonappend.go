package api

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// JSONAppender is a response that writes its own JSON body. Hot listings
// use it: encoding/json re-validates every embedded raw payload, which
// cost more than everything else in GET /events.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: HTML-safe (<, >, & escaped), U+2028/U+2029 escaped, invalid
// UTF-8 replaced with U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
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

func appendJSONTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

func appendJSONStringPtr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, *s)
}

// appendEventFields writes an event's members without the braces.
func appendEventFields(dst []byte, e *Event) []byte {
	dst = append(dst, `"id":"`...)
	dst = append(dst, e.ID.String()...)
	dst = append(dst, `","event_type":`...)
	dst = appendJSONString(dst, e.EventType)
	dst = append(dst, `,"payload":`...)
	if len(e.Payload) == 0 {
		dst = append(dst, "{}"...)
	} else {
		// Payloads come from jsonb: valid JSON, possibly with spaces.
		dst = append(dst, e.Payload...)
	}
	dst = append(dst, `,"created_at":`...)
	dst = appendJSONTime(dst, e.CreatedAt)
	dst = append(dst, `,"severity":`...)
	dst = appendJSONString(dst, e.Severity)
	dst = append(dst, `,"domain":`...)
	dst = appendJSONStringPtr(dst, e.Domain)
	dst = append(dst, `,"tags":[`...)
	for i, t := range e.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, t)
	}
	return append(dst, ']')
}

// AppendJSON implements JSONAppender.
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	dst = appendEventFields(dst, e)
	return append(dst, '}'), nil
}

// AppendJSON implements JSONAppender (shadowing the embedded Event's).
func (a *Alert) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	dst = appendEventFields(dst, &a.Event)
	dst = append(dst, `,"acknowledged":`...)
	if a.Acknowledged {
		dst = append(dst, "true"...)
	} else {
		dst = append(dst, "false"...)
	}
	dst = append(dst, `,"acknowledged_by":`...)
	dst = appendJSONStringPtr(dst, a.AcknowledgedBy)
	dst = append(dst, `,"acknowledged_at":`...)
	if a.AcknowledgedAt == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONTime(dst, *a.AcknowledgedAt)
	}
	dst = append(dst, `,"note":`...)
	dst = appendJSONStringPtr(dst, a.Note)
	dst = append(dst, `,"acknowledged_key_identifier":`...)
	dst = appendJSONStringPtr(dst, a.AcknowledgedKeyIdentifier)
	return append(dst, '}'), nil
}

// AppendJSON implements JSONAppender: the body is the items array. Items
// that write their own JSON do; others go through encoding/json.
func (p *Page[T]) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '[')
	for i := range p.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if a, ok := any(&p.Items[i]).(JSONAppender); ok {
			dst, err = a.AppendJSON(dst)
		} else {
			var b []byte
			b, err = json.Marshal(&p.Items[i])
			dst = append(dst, b...)
		}
		if err != nil {
			return nil, fmt.Errorf("error encoding item %d: %w", i, err)
		}
	}
	return append(dst, ']'), nil
}
