package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
)

type receiversData struct {
	Receivers []api.Receiver
	// Chart is the messages received per day (empty without any).
	Chart template.HTML
}

// receiverDays is how many UTC days the receivers page's chart covers.
const receiverDays = 14

func (h *Dashboard) webReceivers(c *fiber.Ctx) error {
	list, err := h.ops.ListReceivers.Call(c.UserContext(), callerOf(c), &api.ListReceiversRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	days := receiverDays
	daily, err := h.ops.ReceiverDailyVolume.Call(c.UserContext(), callerOf(c), &api.ReceiverDailyRequest{Days: &days})
	if err != nil {
		return h.pageError(c, err)
	}
	return h.render(c, http.StatusOK, "receivers", "Receivers", receiversData{Receivers: list.Items, Chart: receiverChart(daily)}, "")
}

// receiverChart draws the messages received per day by channel; without
// any, nothing.
func receiverChart(d *api.ReceiverDaily) template.HTML {
	c := chart{ID: "receiver-chart", Title: fmt.Sprintf("Messages received per day, last %d days", len(d.Days)), Stacked: true,
		Series: []chartSeries{{Name: "Email", Class: "bar-1"}, {Name: "SMS", Class: "bar-0"}}}
	var total int64
	for _, v := range d.Days {
		at, err := time.Parse(time.DateOnly, v.Date)
		if err != nil {
			continue
		}
		c.Points = append(c.Points, chartPoint{At: at, Values: []float64{float64(v.Email), float64(v.SMS)}})
		total += v.Messages
	}
	if total == 0 {
		return ""
	}
	c.Desc = fmt.Sprintf("%d messages received by the account's receivers over %d days, by channel, including receivers since purged.", total, len(d.Days))
	return c.render()
}

func (h *Dashboard) webCreateReceiver(c *fiber.Ctx) error {
	req := &api.CreateReceiverRequest{Channel: c.FormValue("channel"), Label: c.FormValue("label")}
	if v := c.FormValue("ttl_minutes"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil {
			return h.done(c, "/receivers", api.InvalidField("ttl_minutes", "must be a whole number of minutes"), "")
		}
		secs := m * 60
		req.TTLSeconds = &secs
	}
	r, err := h.ops.CreateReceiver.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.done(c, "/receivers", err, "")
	}
	return h.done(c, "/receivers/"+r.ID.String(), nil, "receiver created: send to "+r.Address)
}

type receiverData struct {
	Receiver *api.Receiver
	Messages []api.MessageSummary
	Last     string
}

func (h *Dashboard) webReceiver(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.pageError(c, api.NotFound("receiver"))
	}
	r, err := h.ops.GetReceiver.Call(c.UserContext(), callerOf(c), &api.ReceiverPath{ID: id})
	if err != nil {
		return h.pageError(c, err)
	}
	list, err := h.ops.ListReceiverMessages.Call(c.UserContext(), callerOf(c), &api.ListMessagesRequest{ID: id})
	if err != nil {
		return h.pageError(c, err)
	}
	data := receiverData{Receiver: r, Messages: list.Items}
	if len(list.Items) > 0 {
		data.Last = list.Items[0].ID.String() // newest first
	}
	return h.render(c, http.StatusOK, "receiver", r.Address, data, "")
}

func (h *Dashboard) webMessage(c *fiber.Ctx) error {
	id, err1 := uuid.Parse(c.Params("id"))
	mid, err2 := uuid.Parse(c.Params("message_id"))
	if err1 != nil || err2 != nil {
		return h.pageError(c, api.NotFound("message"))
	}
	m, err := h.ops.GetReceiverMessage.Call(c.UserContext(), callerOf(c), &api.MessagePath{ID: id, MessageID: mid})
	if err != nil {
		return h.pageError(c, err)
	}
	a, err := h.ops.GetReceiverMessageAnalysis.Call(c.UserContext(), callerOf(c), &api.MessagePath{ID: id, MessageID: mid})
	if err != nil {
		return h.pageError(c, err)
	}
	return h.render(c, http.StatusOK, "message", m.Subject, messageData{Message: m, Deliverability: a}, "")
}

// messageData is the message page: the message and its deliverability
// analysis.
type messageData struct {
	*api.Message
	Deliverability *api.MessageAnalysis
}

// webWaitFeed is the receiver page's long poll: the wait endpoint's own
// function under the session (200 with the next message, 204 when none came).
func (h *Dashboard) webWaitFeed(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return api.NotFound("receiver")
	}
	timeout := 25
	req := &api.WaitRequest{ID: id, Timeout: &timeout}
	if a := c.Query("after"); a != "" {
		after, err := uuid.Parse(a)
		if err != nil {
			return api.InvalidField("after", "must be a message id")
		}
		req.After = &after
	}
	resp, err := h.ops.WaitReceiver.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return err
	}
	return api.WriteResponse(c, http.StatusOK, resp)
}
