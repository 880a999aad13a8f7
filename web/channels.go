package web

import (
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
)

// The settings page's notification channels (Slack, Teams, PagerDuty):
// each form calls the REST operation of the same name.

func (h *Dashboard) webCreateChannel(c *fiber.Ctx) error {
	req := &api.CreateChannelRequest{Kind: c.FormValue("kind"), Label: optional(c.FormValue("label")),
		MinSeverity: optional(c.FormValue("min_severity")), DomainFilter: optional(c.FormValue("domain_filter"))}
	// A PagerDuty channel takes a URL only for another endpoint (the EU one).
	req.URL = optional(c.FormValue("url"))
	if req.Kind == "pagerduty" {
		req.RoutingKey = optional(c.FormValue("routing_key"))
	}
	ch, err := h.ops.CreateNotificationChannel.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.done(c, "/settings#channels", err, "")
	}
	return h.done(c, "/settings#channels", nil, ch.Kind+" channel "+ch.Label+" added: send a test message to check it")
}

func (h *Dashboard) webTestChannel(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/settings#channels", api.NotFound("notification channel"), "")
	}
	res, err := h.ops.TestNotificationChannel.Call(c.UserContext(), callerOf(c), &api.ChannelPath{ID: id})
	if err != nil {
		return h.done(c, "/settings#channels", err, "")
	}
	if res.Status != "delivered" {
		msg := "the test message was not accepted"
		if res.Error != nil {
			msg += ": " + *res.Error
		}
		return h.done(c, "/settings#channels", &api.Error{Status: fiber.StatusBadGateway, Detail: msg}, "")
	}
	return h.done(c, "/settings#channels", nil, "test message delivered")
}

func (h *Dashboard) webDeleteChannel(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/settings#channels", api.NotFound("notification channel"), "")
	}
	_, err = h.ops.DeleteNotificationChannel.Call(c.UserContext(), callerOf(c), &api.ChannelPath{ID: id})
	return h.done(c, "/settings#channels", err, "channel removed")
}
