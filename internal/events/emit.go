package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// Event is what a producer emits.
type Event struct {
	AccountID uuid.UUID
	Type      string
	// Payload is marshalled to JSON; it must match the type's schema.
	Payload any
	// Domain and Tags let subscriptions filter (domain_filter, tag_filter).
	Domain string
	Tags   []string
	// Severity asks for a severity other than the type's default; the
	// type's escalation rule may still raise it (Type.SeverityFor).
	Severity Severity
	// At is the event time; zero means now.
	At time.Time
}

// ErrUnknownType is returned for a type that is not registered.
var ErrUnknownType = errors.New("unknown event type")

// Emitter inserts events and fans them out to subscriptions.
type Emitter struct {
	// River inserts delivery jobs in the emitting transaction. When nil, the
	// client is taken from the context (inside a River worker).
	River *river.Client[pgx.Tx]
}

// Client returns the River client the emitter inserts with, for callers
// that queue their own jobs in the same transaction as their events.
func (e *Emitter) Client(ctx context.Context) (*river.Client[pgx.Tx], error) {
	return e.client(ctx)
}

func (e *Emitter) client(ctx context.Context) (*river.Client[pgx.Tx], error) {
	if e != nil && e.River != nil {
		return e.River, nil
	}
	c, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil, fmt.Errorf("events: no River client to fan out with: %w", err)
	}
	return c, nil
}

// Emit inserts ev in tx and, in the same transaction, creates the
// deliveries of every matching subscription. It returns the stored row.
func (e *Emitter) Emit(ctx context.Context, tx pgx.Tx, ev Event) (dbsqlc.Event, error) {
	t, ok := Lookup(ev.Type)
	if !ok {
		return dbsqlc.Event{}, fmt.Errorf("%w: %q", ErrUnknownType, ev.Type)
	}
	if ev.Severity != "" && !ev.Severity.Valid() {
		return dbsqlc.Event{}, fmt.Errorf("events: invalid severity %q", ev.Severity)
	}
	payload, err := encodePayload(ev.Payload)
	if err != nil {
		return dbsqlc.Event{}, fmt.Errorf("error encoding %s payload: %w", ev.Type, err)
	}
	if len(payload) == 0 || payload[0] != '{' {
		return dbsqlc.Event{}, fmt.Errorf("events: %s payload must be a JSON object", ev.Type)
	}
	// The schemas are the contract subscribers code against: a payload that
	// breaks it is a producer bug, caught here rather than by a customer.
	if err := ValidatePayload(ev.Type, payload); err != nil {
		return dbsqlc.Event{}, err
	}
	// The type's escalation rule applies to every producer, the admin
	// route included.
	sev := t.SeverityFor(ev.Severity, payload)
	at := ev.At
	if at.IsZero() {
		at = time.Now()
	}
	// A critical event about a domain names its likely causes (causes.go).
	if sev == SeverityCritical && ev.Domain != "" && HasCauses(ev.Type) {
		causes, err := LikelyCauses(ctx, tx, ev.AccountID, ev.Domain, ev.Type, at)
		if err != nil {
			return dbsqlc.Event{}, err
		}
		if payload, err = withCauses(payload, causes); err != nil {
			return dbsqlc.Event{}, fmt.Errorf("error adding likely causes to %s: %w", ev.Type, err)
		}
	}
	tags := ev.Tags
	if tags == nil {
		tags = []string{}
	}
	var domain *string
	if ev.Domain != "" {
		domain = &ev.Domain
	}
	// Postgres keeps microseconds; the rendered copy must say the same.
	createdAt := at.UTC().Truncate(time.Microsecond)
	id := uuid.Must(uuid.NewV7())
	rendered := Rendered{ID: id, Type: ev.Type, Payload: payload, CreatedAt: createdAt, Severity: string(sev), Domain: domain, Tags: tags}
	row, err := dbsqlc.New().EventInsert(ctx, tx, dbsqlc.EventInsertParams{
		ID:        id,
		AccountID: ev.AccountID,
		EventType: ev.Type,
		Severity:  string(sev),
		Domain:    domain,
		Tags:      tags,
		Payload:   payload,
		Rendered:  string(rendered.AppendJSON(make([]byte, 0, 256+len(payload)))),
		CreatedAt: createdAt,
	})
	if err != nil {
		return dbsqlc.Event{}, fmt.Errorf("error inserting event: %w", err)
	}
	if err := e.fanOut(ctx, tx, row); err != nil {
		return dbsqlc.Event{}, err
	}
	return row, nil
}

// encodePayload encodes a payload as the API writes JSON: compact, `<`, `>`
// and `&` as they are (not HTML-escaped), so the stored rendering is sent
// as it is. A raw payload that arrives with HTML-safe escapes is tidied
// the same way.
func encodePayload(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return TidyJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}
