package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/rollups"
)

// Payload is an event's per-type JSON object, passed through as stored.
type Payload json.RawMessage

// MarshalJSON implements json.Marshaler.
func (p Payload) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("{}"), nil
	}
	return p, nil
}

// UnmarshalJSON implements json.Unmarshaler: the raw value is kept (a
// JSON null included) and checked by the handler.
func (p *Payload) UnmarshalJSON(b []byte) error {
	*p = append((*p)[:0], b...)
	return nil
}

// JSONSchema documents a payload as an object; its shape per type is in
// GET /api/accounts/me/events/types.
func (Payload) JSONSchema() (jsonschema.Schema, error) {
	var s jsonschema.Schema
	s.AddType(jsonschema.Object)
	s.WithDescription("Per-type content; its JSON Schema is payload_schema in GET /api/accounts/me/events/types.")
	return s, nil
}

// Event is one entry of the account's event log.
type Event struct {
	ID        uuid.UUID `json:"id" validate:"required" description:"UUIDv7; also the {event_id} of an alert."`
	EventType string    `json:"event_type" validate:"required"`
	Payload   Payload   `json:"payload" validate:"required"`
	CreatedAt time.Time `json:"created_at" validate:"required"`
	Severity  string    `json:"severity" validate:"required" enum:"info,warning,critical" description:"A critical event is an alert."`
	Domain    *string   `json:"domain" validate:"required" description:"The domain the event is about, if any."`
	Tags      []string  `json:"tags" validate:"required" description:"The domain's tags when the event was emitted."`
}

func eventFromRow(e dbsqlc.Event) Event {
	tags := e.Tags
	if tags == nil {
		tags = []string{}
	}
	return Event{
		ID: e.ID, EventType: e.EventType, Payload: Payload(e.Payload), CreatedAt: e.CreatedAt.UTC(),
		Severity: e.Severity, Domain: e.Domain, Tags: tags,
	}
}

// EventType describes one registered event type.
type EventType struct {
	Name            string          `json:"name" validate:"required"`
	Title           string          `json:"title" validate:"required" description:"The type's name for people, as the dashboard and alert mail show it."`
	Description     string          `json:"description" validate:"required"`
	DefaultSeverity string          `json:"default_severity" validate:"required" enum:"info,warning,critical"`
	Group           string          `json:"group" validate:"required" description:"The preference group the type belongs to (see /api/accounts/me/preferences)."`
	Required        bool            `json:"required" validate:"required" description:"Always sent on every channel: preferences cannot stop it (the audit and security groups)."`
	Escalation      *string         `json:"escalation" validate:"required" description:"When an event of this type is raised to critical (an alert); null if never."`
	Audit           bool            `json:"audit" validate:"required" description:"Written by an account's own actions (acknowledgements, deletions)."`
	PayloadSchema   json.RawMessage `json:"payload_schema" validate:"required" description:"JSON Schema (2020-12) of the payload."`
	Example         json.RawMessage `json:"example" validate:"required" description:"A payload that matches payload_schema."`
}

// PageParams are the paging parameters every listing shares.
type PageParams struct {
	Since  *time.Time `query:"since" description:"Only events created strictly after this RFC 3339 time."`
	Limit  *int       `query:"limit" validate:"omitempty,min=1,max=200" default:"50" description:"Page size, 1 to 200 (default 50)."`
	Order  string     `query:"order" validate:"omitempty,oneof=desc asc" default:"desc" description:"desc: newest first (default); asc: oldest first, for a forward feed."`
	Cursor string     `query:"cursor" description:"X-Next-Cursor of the previous page."`
}

// filter turns the paging parameters into a ListFilter and the query string
// of the next page (without its cursor).
func (p PageParams) filter(account uuid.UUID) (events.ListFilter, url.Values, error) {
	f := events.ListFilter{AccountID: account, Since: p.Since, Order: events.OrderDesc, Limit: 50}
	q := url.Values{}
	if p.Limit != nil {
		f.Limit = *p.Limit
	}
	q.Set("limit", strconv.Itoa(f.Limit))
	if p.Order == string(events.OrderAsc) {
		f.Order = events.OrderAsc
	}
	q.Set("order", string(f.Order))
	if p.Since != nil {
		q.Set("since", p.Since.UTC().Format(time.RFC3339Nano))
	}
	if p.Cursor != "" {
		c, err := events.ParseCursor(p.Cursor)
		if err != nil {
			return f, nil, BadRequest("query parameter cursor is malformed; pass X-Next-Cursor of the previous page unchanged")
		}
		f.After = &c
	}
	return f, q, nil
}

// ListEventsRequest filters GET /api/accounts/me/events.
type ListEventsRequest struct {
	EventType string `query:"event_type" description:"Only events of this registered type."`
	PageParams
}

// DailyVolumeRequest is GET /api/accounts/me/events/daily-volume.
type DailyVolumeRequest struct {
	Days *int `query:"days" validate:"omitempty,min=1,max=90" default:"7" description:"UTC days to cover, ending today: 1 to 90 (default 7)."`
}

// DailyVolume counts the account's events per UTC day and severity.
type DailyVolume struct {
	Days   int         `json:"days" validate:"required"`
	From   string      `json:"from" validate:"required" format:"date" description:"First UTC day covered."`
	To     string      `json:"to" validate:"required" format:"date" description:"Last UTC day covered (today)."`
	Volume []DayVolume `json:"volume" validate:"required" description:"One entry per day, oldest first, days without events included."`
}

// DayVolume is one UTC day of DailyVolume.
type DayVolume struct {
	Date     string `json:"date" validate:"required" format:"date"`
	Info     int64  `json:"info" validate:"required"`
	Warning  int64  `json:"warning" validate:"required"`
	Critical int64  `json:"critical" validate:"required"`
	Total    int64  `json:"total" validate:"required"`
}

// TypeBreakdownRequest is GET /api/accounts/me/events/type-breakdown.
type TypeBreakdownRequest struct {
	Since *time.Time `query:"since" description:"Count events created strictly after this RFC 3339 time (default: the last instant before the UTC hour 30 days ago, so that the default window is whole hours)."`
}

// TypeBreakdown counts the account's events per type.
type TypeBreakdown struct {
	Since time.Time   `json:"since" validate:"required" description:"Events created after this time were counted."`
	Total int64       `json:"total" validate:"required"`
	Types []TypeCount `json:"types" validate:"required" description:"Types with at least one event, most frequent first."`
}

// TypeCount is one type of TypeBreakdown.
type TypeCount struct {
	EventType string `json:"event_type" validate:"required"`
	Count     int64  `json:"count" validate:"required"`
	Info      int64  `json:"info" validate:"required"`
	Warning   int64  `json:"warning" validate:"required"`
	Critical  int64  `json:"critical" validate:"required"`
}

// typeBreakdownDefault is about the window of type-breakdown without
// since (rollups.HoursBack rounds it to whole hours).
const typeBreakdownDefault = 30 * 24 * time.Hour

func (s *Server) eventRoutes() {
	Handle(s.router, Endpoint[emptyRequest, []EventType]{
		Method: "GET", Path: "/api/accounts/me/events/types", OperationID: "listEventTypes", Tag: "events",
		Summary:     "The registered event types",
		Description: "Every type's description, default severity, escalation rule and payload JSON Schema, with an example payload.",
		Call:        s.listEventTypes,
	})
	s.ops.ListEvents = Handle(s.router, Endpoint[ListEventsRequest, Page[Event]]{
		Method: "GET", Path: "/api/accounts/me/events", OperationID: "listEvents", Tag: "events",
		Summary: "List the account's events",
		Description: "Newest first (order=asc for oldest first), keyset-paginated: when more events match, the " +
			"X-Next-Cursor header carries the cursor of the next page (and Link its URL). Paging newest-first never " +
			"skips or repeats an event while new ones arrive. Events are ordered by when they were raised, not by when " +
			"their transaction committed, so a forward feed (order=asc with a cursor or since) should re-read the last " +
			"minute on each poll and drop ids it has seen. An unregistered event_type is 422; a malformed since or " +
			"cursor is 400.",
		Call: s.listEvents,
	})
	Handle(s.router, Endpoint[DailyVolumeRequest, DailyVolume]{
		Method: "GET", Path: "/api/accounts/me/events/daily-volume", OperationID: "eventDailyVolume", Tag: "events",
		Summary:     "Events per UTC day and severity",
		Description: "The last `days` UTC days including today (default 7, at most 90), oldest first, days without events included.",
		Call:        s.dailyVolume,
	})
	Handle(s.router, Endpoint[TypeBreakdownRequest, TypeBreakdown]{
		Method: "GET", Path: "/api/accounts/me/events/type-breakdown", OperationID: "eventTypeBreakdown", Tag: "events",
		Summary:     "Events per type",
		Description: "Counts of the account's events per type and severity since a time (default: the last 30 days).",
		Call:        s.typeBreakdown,
	})
	s.usageRoutes() // usage.go
}

func (s *Server) listEvents(ctx context.Context, req *ListEventsRequest) (*Page[Event], error) {
	caller := mustCaller(ctx)
	f, q, err := req.filter(caller.AccountID)
	if err != nil {
		return nil, err
	}
	if req.EventType != "" {
		if _, ok := events.Lookup(req.EventType); !ok {
			return nil, InvalidField("event_type", "is not a registered event type; see GET /api/accounts/me/events/types")
		}
		f.Type = req.EventType
		q.Set("event_type", req.EventType)
	}
	rendered, next, err := s.deps.EventPages.ListRendered(ctx, s.db, f)
	if err != nil {
		return nil, err
	}
	page := newPage[Event](nil, "/api/accounts/me/events", q)
	page.raw = rendered
	page.setNext(cursorString(next))
	return page, nil
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// dayRange returns the first and last UTC day of the last n days.
func (s *Server) dayRange(n int) (from, to time.Time) {
	to = utcDay(s.now())
	return to.AddDate(0, 0, -(n - 1)), to
}

func daysParam(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

const dateLayout = "2006-01-02"

func (s *Server) dailyVolume(ctx context.Context, req *DailyVolumeRequest) (*DailyVolume, error) {
	n := daysParam(req.Days, 7)
	from, to := s.dayRange(n)
	days, err := events.DailyVolume(ctx, s.reads, mustCaller(ctx).AccountID, from, n)
	if err != nil {
		return nil, err
	}
	out := &DailyVolume{Days: n, From: from.Format(dateLayout), To: to.Format(dateLayout), Volume: make([]DayVolume, n)}
	for i, d := range days {
		out.Volume[i] = DayVolume{Date: d.Day.Format(dateLayout), Info: d.Info, Warning: d.Warning, Critical: d.Critical, Total: d.Total()}
	}
	return out, nil
}

func (s *Server) typeBreakdown(ctx context.Context, req *TypeBreakdownRequest) (*TypeBreakdown, error) {
	since := rollups.HoursBack(s.now(), typeBreakdownDefault)
	if req.Since != nil {
		since = req.Since.UTC()
	}
	since = since.Truncate(time.Microsecond) // what Postgres compares
	types, err := events.TypeBreakdown(ctx, s.reads, mustCaller(ctx).AccountID, since)
	if err != nil {
		return nil, err
	}
	out := &TypeBreakdown{Since: since, Types: make([]TypeCount, len(types))}
	for i, t := range types {
		out.Types[i] = TypeCount{EventType: t.Type, Count: t.Total(), Info: t.Info, Warning: t.Warning, Critical: t.Critical}
		out.Total += t.Total()
	}
	return out, nil
}

// fillDashboardEvents fills this feature's part of the dashboard summary:
// unacknowledged alerts and the last 24 hours' events by severity.
func (s *Server) fillDashboardEvents(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	n, err := s.q.EventCountUnacknowledgedAlerts(ctx, s.db, account)
	if err != nil {
		return err
	}
	out.Alerts.Unacknowledged = n
	c, err := events.CountBySeverity(ctx, s.reads, account, rollups.LastDay(s.now()))
	if err != nil {
		return err
	}
	out.Events24h.Info, out.Events24h.Warning, out.Events24h.Critical = c.Info, c.Warning, c.Critical
	return nil
}

// listEventTypes serves GET /api/accounts/me/events/types: the registered event types.
func (s *Server) listEventTypes(ctx context.Context, _ *emptyRequest) (*[]EventType, error) {
	all := events.Types()
	out := make([]EventType, len(all))
	for i, t := range all {
		out[i] = EventType{
			Name: t.Name, Title: t.Title, Description: t.Description, DefaultSeverity: string(t.DefaultSeverity),
			Group: t.Group, Required: events.Required(t.Name),
			Audit: t.Audit, PayloadSchema: t.PayloadSchema, Example: t.Example,
		}
		if t.Escalation != "" {
			esc := t.Escalation
			out[i].Escalation = &esc
		}
	}
	return &out, nil
}
