package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/notify"
)

// ChannelSwitches is the body of the group and mute routes.
type ChannelSwitches struct {
	Email   *bool `json:"email" validate:"required" description:"The email channel: alerts at once, the rest in the daily digest."`
	Webhook *bool `json:"webhook" validate:"required" description:"The webhook channel: pushes to the account's event subscriptions."`
}

// switchableGroup is a preference group a client may switch; the document
// lists them (notify decides which).
type switchableGroup string

// Enum implements jsonschema.Enum.
func (switchableGroup) Enum() []any { return anyList(notify.SwitchableGroups()) }

// overridableType is an event type whose channels a client may override.
type overridableType string

// Enum implements jsonschema.Enum.
func (overridableType) Enum() []any { return anyList(notify.OverridableTypes()) }

func anyList(list []string) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}

// PreferenceGroupRequest names a group and sets its switches.
type PreferenceGroupRequest struct {
	Group switchableGroup `path:"group" description:"A group name from GET /api/accounts/me/events/types (field group); a required group (audit, security) is 422."`
	ChannelSwitches
}

// PreferenceOverrideRequest names an event type and sets its override.
type PreferenceOverrideRequest struct {
	_         atLeastOne
	EventType overridableType `path:"event_type"`
	Email     *bool           `json:"email" description:"true or false decides the email channel for this type; null or absent: the group decides."`
	Webhook   *bool           `json:"webhook" description:"true or false decides the webhook channel for this type; null or absent: the group decides."`
}

// PreferenceOverridePath names an event type.
type PreferenceOverridePath struct {
	EventType overridableType `path:"event_type"`
}

// AddNotificationAddressRequest is the body of POST .../notification-addresses.
type AddNotificationAddressRequest struct {
	Email string `json:"email" validate:"required,max=254,email_address" example:"oncall@example.com" description:"Stored lower-cased; gets mail only once verified."`
}

// NotificationAddressPath names one address.
type NotificationAddressPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// VerifyNotificationAddressRequest carries a verification token.
type VerifyNotificationAddressRequest struct {
	Token string `json:"token" validate:"required,max=128" description:"The token from the verification mail."`
}

func preferenceError(err error) error {
	switch {
	case errors.Is(err, notify.ErrUnknownGroup):
		return NotFound("preference group")
	case errors.Is(err, notify.ErrUnknownType):
		return NotFound("event type")
	case errors.Is(err, notify.ErrNoOverride):
		return NotFound("override")
	case errors.Is(err, notify.ErrRequired):
		return &Error{Status: 422, Detail: "events of this group (audit, security) are required and always sent; their preferences cannot be changed"}
	case errors.Is(err, notify.ErrEmptyOverride):
		return InvalidField("email", "set email, webhook or both to true or false (DELETE removes the override)")
	case errors.Is(err, notify.ErrAddressNotFound):
		return NotFound("notification address")
	case errors.Is(err, notify.ErrAddressExists), errors.Is(err, notify.ErrTooManyAddresses):
		return Conflict("%s", err.Error())
	case errors.Is(err, notify.ErrBadToken):
		return NotFound("verification token")
	}
	var busy *notify.RecipientBusyError
	if errors.As(err, &busy) {
		return &Error{Status: http.StatusTooManyRequests, Detail: busy.Error(),
			Headers: map[string]string{fiber.HeaderRetryAfter: strconv.Itoa(int(busy.RetryAfter / time.Second))}}
	}
	return err
}

func (s *Server) preferences(ctx context.Context, account uuid.UUID) (*notify.Preferences, error) {
	set, err := notify.Load(ctx, s.db, account)
	if err != nil {
		return nil, err
	}
	v := set.View()
	return &v, nil
}

func (s *Server) preferenceRoutes() {
	const base = "/api/accounts/me/preferences"
	const tag = "preferences"
	s.ops.GetPreferences = Handle(s.router, Endpoint[emptyRequest, notify.Preferences]{
		Method: "GET", Path: base, OperationID: "getPreferences", Tag: tag,
		Summary: "Notification preferences",
		Description: "Every group with its channel switches (on unless set), every event type with its override and the " +
			"decision for each channel, and the account-wide channel mutes. Resolution, first match wins: a required type " +
			"(groups audit and security) always goes out; a channel mute blocks; the type's override decides; the group's " +
			"switch decides; otherwise on.",
		Call: func(ctx context.Context, _ *emptyRequest) (*notify.Preferences, error) {
			return s.preferences(ctx, mustCaller(ctx).AccountID)
		},
	})
	s.ops.SetPreferenceGroup = Handle(s.router, Endpoint[PreferenceGroupRequest, notify.Preferences]{
		Method: "PUT", Path: base + "/groups/{group}", OperationID: "setPreferenceGroup", Tag: tag, Errors: []int{404},
		Summary:     "Switch a group's channels",
		Description: "An unknown group is 404; a required group (audit, security) is 422. Answers the preferences.",
		Call:        s.setPreferenceGroup,
	})
	Handle(s.router, Endpoint[PreferenceOverrideRequest, notify.Preferences]{
		Method: "PUT", Path: base + "/overrides/{event_type}", OperationID: "setPreferenceOverride", Tag: tag, Errors: []int{404},
		Summary: "Override one event type's channels",
		Description: "The override beats the group's switch but not a channel mute. An unknown type is 404; a required type " +
			"is 422; a body with neither channel set is 422. Answers the preferences.",
		Call: s.setPreferenceOverride,
	})
	Handle(s.router, Endpoint[PreferenceOverridePath, NoContent]{
		Method: "DELETE", Path: base + "/overrides/{event_type}", Status: 204, OperationID: "deletePreferenceOverride", Tag: tag, Errors: []int{404},
		Summary:     "Remove one event type's override",
		Description: "The group decides again. 404 when the type is unknown or has no override.",
		Call:        s.deletePreferenceOverride,
	})
	s.ops.SetChannelMutes = Handle(s.router, Endpoint[ChannelSwitches, notify.Preferences]{
		Method: "PUT", Path: base + "/mutes", OperationID: "setChannelMutes", Tag: tag,
		Summary:     "Mute or unmute a channel account-wide",
		Description: "true mutes the channel for every type except required ones (audit, security). Answers the preferences.",
		Call:        s.setChannelMutes,
	})

	const addrs = "/api/accounts/me/notification-addresses"
	s.ops.ListNotificationAddresses = Handle(s.router, Endpoint[emptyRequest, []notify.Address]{
		Method: "GET", Path: addrs, OperationID: "listNotificationAddresses", Tag: tag,
		Summary:     "List the addresses that get notification mail",
		Description: "Only verified addresses get alerts and digests. The sign-in address is added at sign-up (login: true).",
		Call:        s.listNotificationAddresses,
	})
	s.ops.AddNotificationAddress = Handle(s.router, Endpoint[AddNotificationAddressRequest, notify.Address]{
		Method: "POST", Path: addrs, Status: 201, OperationID: "addNotificationAddress", Tag: tag, Errors: []int{409},
		Summary: "Add a notification address",
		Description: "Added unverified; a verification mail with a single-use token (valid " + strconv.Itoa(int(notify.VerificationTokenTTL/time.Hour)) + " h) is queued. An address the account already has is 409, and so is an 11th address (at most 10, the sign-in address included: each new one is mailed). " +
			"One address gets at most one verification mail a minute and " + strconv.Itoa(notify.RecipientMailsPerDay) + " per UTC day, whichever account asks and however often it is removed and added: " +
			"beyond, 429 with Retry-After and nothing is added.",
		Call: s.addNotificationAddress,
	})
	s.ops.ResendNotificationAddressVerification = Handle(s.router, Endpoint[NotificationAddressPath, notify.Address]{
		Method: "POST", Path: addrs + "/{id}/resend", Status: 202, OperationID: "resendNotificationAddressVerification", Tag: tag, Errors: []int{404},
		Summary: "Send the verification mail again",
		Description: "Queues a new token (the previous one stops working); nothing for a verified address. " +
			"429 with Retry-After within a minute of the last verification mail to the address, or past its " + strconv.Itoa(notify.RecipientMailsPerDay) + " a UTC day (from any account).",
		Call: s.resendNotificationAddressVerification,
	})
	s.ops.RemoveNotificationAddress = Handle(s.router, Endpoint[NotificationAddressPath, NoContent]{
		Method: "DELETE", Path: addrs + "/{id}", Status: 204, OperationID: "removeNotificationAddress", Tag: tag, Errors: []int{404},
		Summary:     "Remove a notification address",
		Description: "The sign-in address can be removed too; it is added again (unverified) when the account's email changes.",
		Call:        s.removeNotificationAddress,
	})
	s.ops.VerifyNotificationAddress = Handle(s.router, Endpoint[VerifyNotificationAddressRequest, notify.Address]{
		Method: "POST", Path: "/api/notification-addresses/verify", OperationID: "verifyNotificationAddress", Tag: tag, Auth: AuthNone, Errors: []int{404},
		Summary: "Verify a notification address",
		Description: "No API key: the single-use token from the verification mail is the proof (limited per client IP). " +
			"An unknown, used or expired token is 404.",
		Call: s.verifyNotificationAddress,
	})
}

// setPreferenceGroup serves PUT /api/accounts/me/preferences/groups/{group}: switch a group's channels.
func (s *Server) setPreferenceGroup(ctx context.Context, req *PreferenceGroupRequest) (*notify.Preferences, error) {
	account := mustCaller(ctx).AccountID
	err := notify.SetGroup(ctx, s.db, account, string(req.Group), notify.Channels{Email: *req.Email, Webhook: *req.Webhook})
	if err != nil {
		return nil, preferenceError(err)
	}
	return s.preferences(ctx, account)
}

// setPreferenceOverride serves PUT /api/accounts/me/preferences/overrides/{event_type}: override one event type's channels.
func (s *Server) setPreferenceOverride(ctx context.Context, req *PreferenceOverrideRequest) (*notify.Preferences, error) {
	account := mustCaller(ctx).AccountID
	if err := notify.SetOverride(ctx, s.db, account, string(req.EventType), notify.Override{Email: req.Email, Webhook: req.Webhook}); err != nil {
		return nil, preferenceError(err)
	}
	return s.preferences(ctx, account)
}

// deletePreferenceOverride serves DELETE /api/accounts/me/preferences/overrides/{event_type}: remove one event type's override.
func (s *Server) deletePreferenceOverride(ctx context.Context, req *PreferenceOverridePath) (*NoContent, error) {
	if err := notify.DeleteOverride(ctx, s.db, mustCaller(ctx).AccountID, string(req.EventType)); err != nil {
		return nil, preferenceError(err)
	}
	return &NoContent{}, nil
}

// setChannelMutes serves PUT /api/accounts/me/preferences/mutes: mute or unmute a channel account-wide.
func (s *Server) setChannelMutes(ctx context.Context, req *ChannelSwitches) (*notify.Preferences, error) {
	account := mustCaller(ctx).AccountID
	if err := notify.SetMutes(ctx, s.db, account, notify.Channels{Email: *req.Email, Webhook: *req.Webhook}); err != nil {
		return nil, err
	}
	return s.preferences(ctx, account)
}

// listNotificationAddresses serves GET /api/accounts/me/notification-addresses: list the addresses that get notification mail.
func (s *Server) listNotificationAddresses(ctx context.Context, _ *emptyRequest) (*[]notify.Address, error) {
	out, err := notify.ListAddresses(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// addNotificationAddress serves POST /api/accounts/me/notification-addresses: add a notification address.
func (s *Server) addNotificationAddress(ctx context.Context, req *AddNotificationAddressRequest) (*notify.Address, error) {
	email, err := normalizeEmail("email", req.Email)
	if err != nil {
		return nil, err
	}
	a, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (notify.Address, error) {
		return notify.AddAddress(ctx, tx, s.deps.River, mustCaller(ctx).AccountID, email, s.now())
	})
	if err != nil {
		return nil, preferenceError(err)
	}
	return &a, nil
}

// resendNotificationAddressVerification serves POST /api/accounts/me/notification-addresses/{id}/resend: send the verification mail again.
func (s *Server) resendNotificationAddressVerification(ctx context.Context, req *NotificationAddressPath) (*notify.Address, error) {
	a, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (notify.Address, error) {
		return notify.ResendVerification(ctx, tx, s.deps.River, mustCaller(ctx).AccountID, req.ID, s.now())
	})
	if err != nil {
		return nil, preferenceError(err)
	}
	return &a, nil
}

// removeNotificationAddress serves DELETE /api/accounts/me/notification-addresses/{id}: remove a notification address.
func (s *Server) removeNotificationAddress(ctx context.Context, req *NotificationAddressPath) (*NoContent, error) {
	if err := notify.RemoveAddress(ctx, s.db, mustCaller(ctx).AccountID, req.ID); err != nil {
		return nil, preferenceError(err)
	}
	return &NoContent{}, nil
}

// verifyNotificationAddress serves POST /api/notification-addresses/verify: verify a notification address.
func (s *Server) verifyNotificationAddress(ctx context.Context, req *VerifyNotificationAddressRequest) (*notify.Address, error) {
	a, err := notify.Verify(ctx, s.db, req.Token, s.now())
	if err != nil {
		return nil, preferenceError(err)
	}
	return &a, nil
}
