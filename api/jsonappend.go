package api

import (
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
	return r.AppendJSON(dst), nil
}

// AppendJSON implements JSONAppender (shadowing the embedded Event's).
func (a *Alert) AppendJSON(dst []byte) ([]byte, error) {
	r := a.Event.rendered()
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
	return append(dst, '}'), nil
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
			b, err = json.Marshal(&p.Items[i])
			dst = append(dst, b...)
		}
		if err != nil {
			return nil, fmt.Errorf("error encoding item %d: %w", i, err)
		}
	}
	return append(dst, ']'), nil
}
