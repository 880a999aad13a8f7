package api

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// NotificationChannel is a Slack, Teams or PagerDuty channel as the API
// shows it: the destination only redacted.
type NotificationChannel struct {
	ID            uuid.UUID  `json:"id" validate:"required"`
	Kind          string     `json:"kind" validate:"required" enum:"slack,teams,pagerduty"`
	Label         string     `json:"label" validate:"required"`
	Destination   string     `json:"destination" validate:"required" description:"The destination, redacted: the URL's scheme and host followed by …, and for PagerDuty the routing key's last 4 characters. The URL and key are never shown again."`
	Groups        []string   `json:"groups" validate:"required" description:"Preference groups sent; null means every group. Required groups (audit, security) are always sent."`
	MinSeverity   string     `json:"min_severity" validate:"required" enum:"info,warning,critical"`
	DomainFilter  *string    `json:"domain_filter" validate:"required"`
	TagFilter     *string    `json:"tag_filter" validate:"required"`
	LastSuccessAt *time.Time `json:"last_success_at" validate:"required" description:"Last successful send."`
	FailingSince  *time.Time `json:"failing_since" validate:"required" description:"First failed send since the last success; null while healthy. After a day, notification_channel_failing is raised."`
	LastError     *string    `json:"last_error" validate:"required" description:"What the last failed send got; null while healthy."`
	CreatedAt     time.Time  `json:"created_at" validate:"required"`
	UpdatedAt     time.Time  `json:"updated_at" validate:"required"`
}

func channelFromRow(r dbsqlc.NotificationChannel) NotificationChannel {
	return NotificationChannel{
		ID: r.ID, Kind: r.Kind, Label: r.Label, Destination: r.Destination, Groups: r.Groups, MinSeverity: r.MinSeverity,
		DomainFilter: r.DomainFilter, TagFilter: r.TagFilter, LastSuccessAt: whUTC(r.LastSuccessAt),
		FailingSince: whUTC(r.FailingSince), LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// CreateChannelRequest is the body of POST .../notification-channels.
type CreateChannelRequest struct {
	Kind         string   `json:"kind" validate:"required,oneof=slack teams pagerduty" description:"slack (incoming webhook), teams (workflow webhook) or pagerduty (Events API v2)."`
	Label        *string  `json:"label,omitempty" validate:"omitempty,max=100" example:"#ops-alerts" description:"A name for people."`
	URL          *string  `json:"url,omitempty" validate:"omitempty,max=2048" example:"https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX" description:"slack and teams: the webhook URL (required). pagerduty: the Events API v2 endpoint, default https://events.pagerduty.com/v2/enqueue (EU accounts: https://events.eu.pagerduty.com/v2/enqueue). Its host must be one of the kind's hosts (or the operator's CHANNEL_ALLOWED_HOSTS): 422 otherwise. Stored encrypted, never shown again."`
	RoutingKey   *string  `json:"routing_key,omitempty" validate:"omitempty,max=64" description:"pagerduty only, required: the 32-character integration key. Stored encrypted; only its last 4 characters are shown."`
	Groups       []string `json:"groups,omitempty" nullable:"true" validate:"omitempty,max=20" description:"Preference groups to send (GET .../preferences lists them); omitted or null means every group. Required groups (audit, security) are sent whatever this says."`
	MinSeverity  *string  `json:"min_severity,omitempty" validate:"omitempty,oneof=info warning critical" description:"Least severity sent; default critical (alerts only). PagerDuty channels are only ever sent alerts."`
	DomainFilter *string  `json:"domain_filter,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"Only events about this domain."`
	TagFilter    *string  `json:"tag_filter,omitempty" validate:"omitempty,min=1,max=64,not_blank" description:"Only events carrying this tag."`
}

// UpdateChannelRequest is the body of PATCH .../notification-channels/{id}.
type UpdateChannelRequest struct {
	_            atLeastOne
	ID           uuid.UUID       `path:"id" format:"uuid"`
	Label        *string         `json:"label,omitempty" validate:"omitempty,max=100" description:"New name for people."`
	MinSeverity  *string         `json:"min_severity,omitempty" validate:"omitempty,oneof=info warning critical" description:"New least severity sent."`
	Groups       OptionalStrings `json:"groups,omitempty" validate:"omitempty,max=20" description:"New preference groups; null means every group."`
	DomainFilter OptionalString  `json:"domain_filter,omitempty" validate:"omitempty,max=253,domain_name" example:"example.com" description:"New domain filter; null clears it."`
	TagFilter    OptionalString  `json:"tag_filter,omitempty" validate:"omitempty,min=1,max=64,not_blank" description:"New tag filter; null clears it."`
}

// ChannelPath names one notification channel.
type ChannelPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// ChannelTestResult is the outcome of a test message.
type ChannelTestResult struct {
	Status     string  `json:"status" validate:"required" enum:"delivered,failed" description:"delivered: the destination answered 2xx."`
	StatusCode *int    `json:"status_code" validate:"required" description:"HTTP status answered; null when there was no answer."`
	Error      *string `json:"error" validate:"required" description:"What went wrong; null on success."`
}

func (s *Server) channelRoutes() {
	const base = "/api/accounts/me/notification-channels"
	s.ops.CreateNotificationChannel = Handle(s.router, Endpoint[CreateChannelRequest, NotificationChannel]{
		Method: "POST", Path: base, Status: 201, OperationID: "createNotificationChannel", Tag: "notification channels", Errors: []int{409},
		Summary: "Add a Slack, Teams or PagerDuty channel",
		Description: "Events matching the filters are sent to the channel as they happen: a Block Kit message to Slack, an " +
			"Adaptive Card to Teams, an Events API v2 trigger to PagerDuty (resolved when the alert is acknowledged). " +
			"A destination whose host is not one of the kind's is 422; more than 20 channels is 409.",
		Call: s.createChannel,
	})
	s.ops.ListNotificationChannels = Handle(s.router, Endpoint[emptyRequest, []NotificationChannel]{
		Method: "GET", Path: base, OperationID: "listNotificationChannels", Tag: "notification channels",
		Summary: "List the account's notification channels",
		Call:    s.listChannels,
	})
	Handle(s.router, Endpoint[ChannelPath, NotificationChannel]{
		Method: "GET", Path: base + "/{id}", OperationID: "getNotificationChannel", Tag: "notification channels", Errors: []int{404},
		Summary: "One notification channel",
		Call:    s.getChannel,
	})
	Handle(s.router, Endpoint[UpdateChannelRequest, NotificationChannel]{
		Method: "PATCH", Path: base + "/{id}", OperationID: "updateNotificationChannel", Tag: "notification channels", Errors: []int{404},
		Summary: "Change a notification channel's name or routing",
		Description: "Only the fields present change, checked as at creation; null clears groups (every group), " +
			"domain_filter or tag_filter. The kind and the destination never change: add another channel instead.",
		Call: s.updateChannel,
	})
	s.ops.DeleteNotificationChannel = Handle(s.router, Endpoint[ChannelPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteNotificationChannel", Tag: "notification channels", Errors: []int{404},
		Summary: "Delete a notification channel",
		Call:    s.deleteChannel,
	})
	s.ops.TestNotificationChannel = Handle(s.router, Endpoint[ChannelPath, ChannelTestResult]{
		Method: "POST", Path: base + "/{id}/test", OperationID: "testNotificationChannel", Tag: "notification channels", Errors: []int{404},
		Summary: "Send a test message now",
		Description: "Sends a test message through the same checks and client as every send and reports the outcome; " +
			"nothing is stored or retried. A PagerDuty channel gets an info trigger, resolved at once.",
		Call: s.testChannel,
	})
}

// channelError maps internal/channels' errors to the API's answers.
func channelError(err error) error {
	var field *channels.FieldError
	var max *channels.LimitError
	switch {
	case errors.Is(err, channels.ErrNotFound):
		return NotFound("notification channel")
	case errors.As(err, &field):
		return InvalidField(field.Field, field.Message)
	case errors.As(err, &max):
		return Conflict("%s", max.Error())
	case errors.Is(err, channels.ErrSecretUnreadable):
		return Unavailable("%s", channels.ErrSecretUnreadable.Error())
	}
	return err
}

func (s *Server) channelService() *channels.Service {
	return &channels.Service{Keyring: s.deps.Keyring, Hosts: s.deps.ChannelHosts, Client: s.deps.WebhookClient, BaseURL: s.deps.DashboardURL}
}

// createChannel serves POST /api/accounts/me/notification-channels: add a channel.
func (s *Server) createChannel(ctx context.Context, req *CreateChannelRequest) (*NotificationChannel, error) {
	n := channels.New{Kind: req.Kind, URL: req.URL, RoutingKey: req.RoutingKey, Groups: req.Groups,
		DomainFilter: req.DomainFilter, TagFilter: req.TagFilter}
	if req.Label != nil {
		n.Label = *req.Label
	}
	if req.MinSeverity != nil {
		n.MinSeverity = *req.MinSeverity
	}
	row, err := s.channelService().Create(ctx, s.db, mustCaller(ctx).AccountID, n)
	if err != nil {
		return nil, channelError(err)
	}
	out := channelFromRow(row)
	return &out, nil
}

// listChannels serves GET /api/accounts/me/notification-channels: list the account's channels.
func (s *Server) listChannels(ctx context.Context, _ *emptyRequest) (*[]NotificationChannel, error) {
	rows, err := channels.List(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	out := make([]NotificationChannel, len(rows))
	for i, r := range rows {
		out[i] = channelFromRow(r)
	}
	return &out, nil
}

// getChannel serves GET /api/accounts/me/notification-channels/{id}: one channel.
func (s *Server) getChannel(ctx context.Context, req *ChannelPath) (*NotificationChannel, error) {
	row, err := channels.Get(ctx, s.db, mustCaller(ctx).AccountID, req.ID)
	if err != nil {
		return nil, channelError(err)
	}
	out := channelFromRow(row)
	return &out, nil
}

// updateChannel serves PATCH /api/accounts/me/notification-channels/{id}: change a channel's name or routing.
func (s *Server) updateChannel(ctx context.Context, req *UpdateChannelRequest) (*NotificationChannel, error) {
	c := channels.Change{Label: req.Label, MinSeverity: req.MinSeverity,
		DomainFilter: req.DomainFilter.change(), TagFilter: req.TagFilter.change()}
	if req.Groups.Set {
		groups := req.Groups.Value
		if req.Groups.Null {
			groups = nil
		}
		c.Groups = &groups
	}
	row, err := s.channelService().Update(ctx, s.db, mustCaller(ctx).AccountID, req.ID, c)
	if err != nil {
		return nil, channelError(err)
	}
	out := channelFromRow(row)
	return &out, nil
}

// deleteChannel serves DELETE /api/accounts/me/notification-channels/{id}: delete a channel.
func (s *Server) deleteChannel(ctx context.Context, req *ChannelPath) (*NoContent, error) {
	if err := channels.Delete(ctx, s.db, mustCaller(ctx).AccountID, req.ID); err != nil {
		return nil, channelError(err)
	}
	return &NoContent{}, nil
}

// testChannel serves POST /api/accounts/me/notification-channels/{id}/test: send a test message now.
func (s *Server) testChannel(ctx context.Context, req *ChannelPath) (*ChannelTestResult, error) {
	a, err := s.channelService().Test(ctx, s.db, mustCaller(ctx).AccountID, req.ID, s.now())
	if err != nil {
		return nil, channelError(err)
	}
	out := &ChannelTestResult{Status: "failed"}
	if a.Delivered {
		out.Status = "delivered"
	}
	if a.StatusCode != 0 {
		code := a.StatusCode
		out.StatusCode = &code
	}
	if a.Error != "" {
		msg := a.Error
		out.Error = &msg
	}
	return out, nil
}
