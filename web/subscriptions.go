package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/events"
)

type subscriptionsData struct {
	Subscriptions []api.Subscription
	Created       *api.NewSubscription
	Rotated       *api.RotatedSecret
	Test          *api.SubscriptionTestResult
	Groups        []typeGroup
	// Form is what was typed into a refused create form, shown again.
	Form subscriptionForm
}

// subscriptionForm is the create form's values.
type subscriptionForm struct {
	URL, DomainFilter, TagFilter string
	MaxPerSecond, MaxInFlight    string
	EventTypes                   map[string]bool
}

// formInt32 reads an optional whole-number field: nil when blank; a value
// that is not a number is passed on as 0, which the API refuses with the
// field's name.
func formInt32(v string) *int32 {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		n = 0
	}
	i := int32(n)
	return &i
}

// typeGroup is one preference group's event types, for the checkboxes.
type typeGroup struct {
	Title, Description string
	Types              []events.Type
}

// eventTypeGroups lists the registered types by preference group, in the
// groups' order.
func eventTypeGroups() []typeGroup {
	var out []typeGroup
	all := events.Types()
	for _, g := range events.Groups() {
		tg := typeGroup{Title: g.Title, Description: g.Description}
		for _, t := range all {
			if t.Group == g.Name {
				tg.Types = append(tg.Types, t)
			}
		}
		if len(tg.Types) > 0 {
			out = append(out, tg)
		}
	}
	return out
}

func (h *Dashboard) subscriptionsPage(c *fiber.Ctx, status int, extra subscriptionsData, problem string) error {
	list, err := h.ops.ListEventSubscriptions.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	extra.Subscriptions = *list
	extra.Groups = eventTypeGroups()
	return h.render(c, status, "subscriptions", "Subscriptions", extra, problem)
}

func (h *Dashboard) webSubscriptions(c *fiber.Ctx) error {
	return h.subscriptionsPage(c, http.StatusOK, subscriptionsData{}, "")
}

func optional(v string) *string {
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	return &v
}

func (h *Dashboard) webCreateSubscription(c *fiber.Ctx) error {
	req := &api.CreateSubscriptionRequest{URL: c.FormValue("url"), DomainFilter: optional(c.FormValue("domain_filter")),
		TagFilter: optional(c.FormValue("tag_filter")), MaxPerSecond: formInt32(c.FormValue("max_per_second")),
		MaxInFlight: formInt32(c.FormValue("max_in_flight"))}
	if args := c.Context().PostArgs(); args != nil {
		for _, v := range args.PeekMulti("event_types") {
			req.EventTypes = append(req.EventTypes, string(v))
		}
	}
	sub, err := h.ops.CreateEventSubscription.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		status, msg := h.problemText(c, err)
		form := subscriptionForm{URL: req.URL, DomainFilter: c.FormValue("domain_filter"), TagFilter: c.FormValue("tag_filter"),
			MaxPerSecond: c.FormValue("max_per_second"), MaxInFlight: c.FormValue("max_in_flight"), EventTypes: map[string]bool{}}
		for _, t := range req.EventTypes {
			form.EventTypes[t] = true
		}
		return h.subscriptionsPage(c, status, subscriptionsData{Form: form}, msg)
	}
	// The signing secret is shown in this answer only.
	return h.subscriptionsPage(c, http.StatusCreated, subscriptionsData{Created: sub}, "")
}

func (h *Dashboard) webTestSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/subscriptions", api.NotFound("subscription"), "")
	}
	res, err := h.ops.TestEventSubscription.Call(c.UserContext(), callerOf(c), &api.SubscriptionPath{ID: id})
	if err != nil {
		return h.done(c, "/subscriptions", err, "")
	}
	return h.subscriptionsPage(c, http.StatusOK, subscriptionsData{Test: res}, "")
}

// webRotateSecret rotates a subscription's signing secret with the grace
// chosen in the form (hours) and shows the new secret, once.
func (h *Dashboard) webRotateSecret(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/subscriptions", api.NotFound("subscription"), "")
	}
	req := &api.RotateSecretRequest{ID: id}
	if v := strings.TrimSpace(c.FormValue("grace_hours")); v != "" {
		hours, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			hours = -1 // refused by the API with the field's name
		}
		secs := hours * 3600
		req.GracePeriodSeconds = &secs
	}
	res, err := h.ops.RotateSecret.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.done(c, "/subscriptions", err, "")
	}
	return h.subscriptionsPage(c, http.StatusOK, subscriptionsData{Rotated: res}, "")
}

// recoverWindows are the ranges the dashboard offers to push again, by
// form value: the last hour to the last 14 days (a minute short, so that
// the range is still within the API's 14 days when it checks).
var recoverWindows = map[string]time.Duration{
	"1h": time.Hour, "6h": 6 * time.Hour, "24h": 24 * time.Hour, "3d": 3 * 24 * time.Hour,
	"7d": 7 * 24 * time.Hour, "14d": 14*24*time.Hour - time.Minute,
}

// webRecoverSubscription pushes again the subscription's failed
// deliveries of the window chosen, up to now.
func (h *Dashboard) webRecoverSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/subscriptions", api.NotFound("subscription"), "")
	}
	window, ok := recoverWindows[c.FormValue("window")]
	if !ok {
		return h.done(c, "/subscriptions", api.InvalidField("window", "must be one of the ranges offered"), "")
	}
	res, err := h.ops.RecoverSubscription.Call(c.UserContext(), callerOf(c),
		&api.RecoverSubscriptionRequest{ID: id, Since: h.deps.Now().Add(-window)})
	if err != nil {
		return h.done(c, "/subscriptions", err, "")
	}
	msg := fmt.Sprintf("recovery queued (job %d): the failed deliveries since %s are pushed again",
		res.JobID, res.Since.UTC().Format("2006-01-02 15:04 UTC"))
	if res.AlreadyQueued {
		msg = fmt.Sprintf("this range is already being recovered (job %d)", res.JobID)
	}
	return h.done(c, "/subscriptions", nil, msg)
}

func (h *Dashboard) webEnableSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/subscriptions", api.NotFound("subscription"), "")
	}
	on := c.FormValue("enabled") == "true"
	_, err = h.ops.UpdateEventSubscription.Call(c.UserContext(), callerOf(c), &api.UpdateSubscriptionRequest{ID: id, Enabled: &on})
	msg := "subscription disabled"
	if on {
		msg = "subscription enabled"
	}
	return h.done(c, "/subscriptions", err, msg)
}

func (h *Dashboard) webDeleteSubscription(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/subscriptions", api.NotFound("subscription"), "")
	}
	_, err = h.ops.DeleteEventSubscription.Call(c.UserContext(), callerOf(c), &api.SubscriptionPath{ID: id})
	return h.done(c, "/subscriptions", err, "subscription deleted")
}

type deliveriesData struct {
	Deliveries []api.Delivery
	Status     string
	// URLs are the destinations, by subscription id.
	URLs map[uuid.UUID]string
}

// subscriptionURLs maps the account's subscriptions to their URLs (a
// plan-bounded list).
func (h *Dashboard) subscriptionURLs(c *fiber.Ctx) (map[uuid.UUID]string, error) {
	list, err := h.ops.ListEventSubscriptions.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return nil, err
	}
	urls := make(map[uuid.UUID]string, len(*list))
	for _, s := range *list {
		urls[s.ID] = s.URL
	}
	return urls, nil
}

func (h *Dashboard) webDeliveries(c *fiber.Ctx) error {
	req := &api.ListDeliveriesRequest{Status: c.Query("status")}
	if v := c.Query("subscription_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return h.pageError(c, api.NotFound("subscription"))
		}
		req.SubscriptionID = &id
	}
	p, err := h.ops.ListDeliveries.Call(c.UserContext(), callerOf(c), req)
	if err != nil {
		return h.pageError(c, err)
	}
	urls, err := h.subscriptionURLs(c)
	if err != nil {
		return h.pageError(c, err)
	}
	return h.render(c, http.StatusOK, "deliveries", "Deliveries", deliveriesData{Deliveries: p.Items, Status: req.Status, URLs: urls}, "")
}

func (h *Dashboard) webDelivery(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.pageError(c, api.NotFound("delivery"))
	}
	d, err := h.ops.GetDelivery.Call(c.UserContext(), callerOf(c), &api.DeliveryPath{ID: id})
	if err != nil {
		return h.pageError(c, err)
	}
	urls, err := h.subscriptionURLs(c)
	if err != nil {
		return h.pageError(c, err)
	}
	return h.render(c, http.StatusOK, "delivery", "Delivery", deliveryData{DeliveryDetail: d, URL: urls[d.SubscriptionID]}, "")
}

// deliveryData is a delivery with its destination.
type deliveryData struct {
	*api.DeliveryDetail
	URL string
}

func (h *Dashboard) webRetryDelivery(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/deliveries", api.NotFound("delivery"), "")
	}
	_, err = h.ops.RetryDelivery.Call(c.UserContext(), callerOf(c), &api.DeliveryPath{ID: id})
	return h.done(c, "/deliveries/"+id.String(), err, "retry queued")
}
