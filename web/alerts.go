package web

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
)

type alertsData struct {
	Alerts []api.Alert
	Show   string
	// Target is the alert the alert mail links to (?event=<id>): the page
	// marks it and scrolls to it.
	Target string
}

func (h *Dashboard) webAlerts(c *fiber.Ctx) error {
	req := &api.ListAlertsRequest{}
	var target string
	if id, err := uuid.Parse(c.Query("event")); err == nil {
		target = id.String()
	}
	def := "open"
	if target != "" {
		def = "all" // the linked alert may have been acknowledged since
	}
	show := c.Query("show", def)
	switch show {
	case "open":
		f := false
		req.Acknowledged = &f
	case "acknowledged":
		t := true
		req.Acknowledged = &t
	default:
		show = "all"
	}
	p, err := h.ops.ListAlerts.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.pageError(c, err)
	}
	items, err := p.Entries()
	if err != nil {
		return err
	}
	problem := ""
	if target != "" {
		found := false
		for _, a := range items {
			found = found || a.ID.String() == target
		}
		if !found {
			problem = "the alert this link names is not in this list: it may be older than the alerts shown, or not this account's"
		}
	}
	return h.render(c, http.StatusOK, "alerts", "Alerts", alertsData{Alerts: items, Show: show, Target: target}, problem)
}

func (h *Dashboard) webAcknowledge(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/alerts", api.NotFound("alert"), "")
	}
	req := &api.AcknowledgeRequest{AlertPath: api.AlertPath{EventID: id}, AcknowledgedBy: c.FormValue("acknowledged_by")}
	if n := c.FormValue("note"); n != "" {
		req.Note = &n
	}
	_, err = h.ops.AcknowledgeAlert.Call(c.UserContext(), callerOf(c), req)
	return h.done(c, "/alerts", err, "alert acknowledged")
}

func (h *Dashboard) webWithdraw(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/alerts", api.NotFound("alert"), "")
	}
	_, err = h.ops.UnacknowledgeAlert.Call(c.UserContext(), callerOf(c), &api.AlertPath{EventID: id})
	return h.done(c, "/alerts?show=acknowledged", err, "acknowledgement withdrawn")
}
