package web

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/notify"
)

type settingsData struct {
	Keys      []api.APIKey
	Created   *api.NewAPIKey
	Prefs     *notify.Preferences
	Overrides []notify.TypePrefs
	Addresses []notify.Address
	Plan      *api.AccountPlan
	PlanRows  []planRow
	Weekly    *api.WeeklyDigestSettings
	Channels  []api.NotificationChannel
}

// planRow is one counted limit of the plan section.
type planRow struct {
	Name  string
	Used  int64
	Limit *int // nil: no limit
}

// Full says a create of one more would be refused.
func (r planRow) Full() bool { return r.Limit != nil && r.Used >= int64(*r.Limit) }

func (h *Dashboard) settingsPage(c *fiber.Ctx, status int, created *api.NewAPIKey, problem string) error {
	keys, err := h.ops.ListAPIKeys.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	data := settingsData{Keys: *keys, Created: created}
	if data.Prefs, err = h.ops.GetPreferences.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{}); err != nil {
		return h.pageError(c, err)
	}
	for _, g := range data.Prefs.Groups {
		for _, t := range g.Types {
			if t.Override.Email != nil || t.Override.Webhook != nil {
				data.Overrides = append(data.Overrides, t)
			}
		}
	}
	if data.Weekly, err = h.ops.GetWeeklyDigest.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{}); err != nil {
		return h.pageError(c, err)
	}
	addrs, err := h.ops.ListNotificationAddresses.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	data.Addresses = *addrs
	chans, err := h.ops.ListNotificationChannels.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	data.Channels = *chans
	if data.Plan, err = h.ops.GetAccountPlan.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{}); err != nil {
		return h.pageError(c, err)
	}
	l, u := data.Plan.Limits, data.Plan.Usage
	data.PlanRows = []planRow{{"Domains", u.Domains, l.Domains}, {"Live receivers", u.Receivers, l.Receivers},
		{"Event subscriptions", u.Subscriptions, l.Subscriptions}, {"Sending providers", u.Providers, l.Providers}}
	return h.render(c, status, "settings", "Settings", data, problem)
}

func (h *Dashboard) webSettings(c *fiber.Ctx) error { return h.settingsPage(c, http.StatusOK, nil, "") }

func (h *Dashboard) webCreateAPIKey(c *fiber.Ctx) error {
	k, err := h.ops.CreateAPIKey.Call(c.UserContext(), callerOf(c), &api.CreateAPIKeyRequest{Label: c.FormValue("label")})
	if err != nil {
		status, msg := h.problemText(c, err)
		return h.settingsPage(c, status, nil, msg)
	}
	// Rendered in this answer only: the key is never stored or sent again.
	return h.settingsPage(c, http.StatusCreated, k, "")
}

func (h *Dashboard) webRevokeAPIKey(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/settings", api.NotFound("API key"), "")
	}
	_, err = h.ops.RevokeAPIKey.Call(c.UserContext(), callerOf(c), &api.APIKeyPath{ID: id})
	return h.done(c, "/settings", err, "API key revoked")
}

// checked reads a checkbox: present and "on" (or "true") is true.
func checked(c *fiber.Ctx, name string) *bool {
	v := c.FormValue(name)
	on := v == "on" || v == "true"
	return &on
}

func (h *Dashboard) webSetMutes(c *fiber.Ctx) error {
	_, err := h.ops.SetChannelMutes.Call(c.UserContext(), callerOf(c), &api.ChannelSwitches{Email: checked(c, "email"), Webhook: checked(c, "webhook")})
	return h.done(c, "/settings#preferences", err, "channel mutes saved")
}

// webSetGroups saves the preference table in one submission: each
// switchable group whose channels changed is set (an unchanged one is left
// as it is, so a save writes no needless audit trail).
func (h *Dashboard) webSetGroups(c *fiber.Ctx) error {
	prefs, err := h.ops.GetPreferences.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.done(c, "/settings#preferences", err, "")
	}
	changed := 0
	for _, g := range prefs.Groups {
		if g.Required {
			continue
		}
		email, webhook := checked(c, "email:"+g.Name), checked(c, "webhook:"+g.Name)
		if *email == g.Channels.Email && *webhook == g.Channels.Webhook {
			continue
		}
		if _, err := h.ops.SetPreferenceGroup.Call(c.UserContext(), callerOf(c), &api.PreferenceGroupRequest{
			Group: api.SwitchableGroup(g.Name), ChannelSwitches: api.ChannelSwitches{Email: email, Webhook: webhook}}); err != nil {
			return h.done(c, "/settings#preferences", err, "")
		}
		changed++
	}
	msg := "preferences saved"
	if changed == 0 {
		msg = "nothing changed"
	}
	return h.done(c, "/settings#preferences", nil, msg)
}

func (h *Dashboard) webAddAddress(c *fiber.Ctx) error {
	a, err := h.ops.AddNotificationAddress.Call(c.UserContext(), callerOf(c), &api.AddNotificationAddressRequest{Email: c.FormValue("email")})
	if err != nil {
		return h.done(c, "/settings#addresses", err, "")
	}
	return h.done(c, "/settings#addresses", nil, a.Email+" added: follow the link in the mail sent to it to verify it")
}

func (h *Dashboard) webRemoveAddress(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/settings#addresses", api.NotFound("notification address"), "")
	}
	_, err = h.ops.RemoveNotificationAddress.Call(c.UserContext(), callerOf(c), &api.NotificationAddressPath{ID: id})
	return h.done(c, "/settings#addresses", err, "address removed")
}

func (h *Dashboard) webResendAddress(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return h.done(c, "/settings#addresses", api.NotFound("notification address"), "")
	}
	a, err := h.ops.ResendNotificationAddressVerification.Call(c.UserContext(), callerOf(c), &api.NotificationAddressPath{ID: id})
	if err != nil {
		return h.done(c, "/settings#addresses", err, "")
	}
	if a.Verified {
		return h.done(c, "/settings#addresses", nil, a.Email+" is already verified")
	}
	return h.done(c, "/settings#addresses", nil, "a new verification mail is on its way to "+a.Email)
}

// webSetWeekly saves the weekly digest form: the two switches and the
// comma-separated domains and tags (the API normalises and bounds them).
func (h *Dashboard) webSetWeekly(c *fiber.Ctx) error {
	_, err := h.ops.SetWeeklyDigest.Call(c.UserContext(), callerOf(c), &api.WeeklyDigestSettings{
		Enabled: checked(c, "enabled"), ReplaceDaily: checked(c, "replace_daily"),
		Domains: splitList(c.FormValue("domains")), Tags: splitList(c.FormValue("tags")),
	})
	return h.done(c, "/settings#weekly", err, "weekly digest saved")
}
