package web

import (
	"bytes"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/events"
)

type eventsData struct {
	Events []api.Event
	Types  []string
	Type   string
	Since  string
	Newest string
}

// eventsRequest reads the events page's filters (type, and since as an
// RFC 3339 time or a datetime-local value taken as UTC).
func eventsRequest(c *fiber.Ctx) (*api.ListEventsRequest, error) {
	req := &api.ListEventsRequest{EventType: c.Query("event_type")}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if t, err = time.Parse("2006-01-02T15:04", v); err != nil {
				return nil, api.InvalidField("since", "must be a time such as 2026-01-02T15:04:05Z")
			}
		}
		req.Since = &t
	}
	if c.Query("order") == "asc" {
		req.Order = "asc"
	}
	return req, nil
}

func (h *Dashboard) webEvents(c *fiber.Ctx) error {
	data := eventsData{Type: c.Query("event_type"), Since: c.Query("since")}
	for _, t := range events.Types() {
		data.Types = append(data.Types, t.Name)
	}
	req, err := eventsRequest(c)
	if err != nil {
		return h.render(c, http.StatusUnprocessableEntity, "events", "Events", data, "since: must be a time")
	}
	p, err := h.ops.ListEvents.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		status, msg := h.problemText(c, err)
		return h.render(c, status, "events", "Events", data, msg)
	}
	if data.Events, err = p.Entries(); err != nil {
		return err
	}
	if len(data.Events) > 0 {
		data.Newest = data.Events[0].CreatedAt.Format(time.RFC3339Nano)
	} else {
		data.Newest = h.deps.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	}
	return h.render(c, http.StatusOK, "events", "Events", data, "")
}

// webEventsFeed answers the events page's poll: the listing's JSON, as the
// REST route would give it.
func (h *Dashboard) webEventsFeed(c *fiber.Ctx) error {
	req, err := eventsRequest(c)
	if err != nil {
		return err
	}
	p, err := h.ops.ListEvents.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return err
	}
	evs, err := p.Entries()
	if err != nil {
		return err
	}
	// Each new event as the page's own template renders it, so the words
	// of a live event and of a loaded one are the same.
	items := make([]feedItem, 0, len(evs))
	for _, e := range evs {
		var buf bytes.Buffer
		if err := h.pages["events"].ExecuteTemplate(&buf, "event-item", e); err != nil {
			return err
		}
		items = append(items, feedItem{CreatedAt: e.CreatedAt.Format(time.RFC3339Nano), HTML: buf.String()})
	}
	return api.WriteResponse(c, http.StatusOK, items)
}

// feedItem is one event of the events page's poll: its time (the poll's
// next cursor) and its list item.
type feedItem struct {
	CreatedAt string `json:"created_at"`
	HTML      string `json:"html"`
}
