package api

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/rollups"
)

// MessageDailyVolumeRequest is GET /api/accounts/me/messages/daily-volume.
type MessageDailyVolumeRequest struct {
	Days   *int    `query:"days" validate:"omitempty,min=1,max=90" default:"7" description:"UTC days to cover, ending today: 1 to 90 (default 7)."`
	Domain *string `query:"domain" validate:"omitempty,max=253,domain_name" example:"example.com" description:"Only events of this sending domain."`
}

// MessageDailyVolume counts sending-provider message events per UTC day
// and outcome.
type MessageDailyVolume struct {
	Days   int                `json:"days" validate:"required"`
	From   string             `json:"from" validate:"required" format:"date"`
	To     string             `json:"to" validate:"required" format:"date"`
	Domain *string            `json:"domain" validate:"required"`
	Volume []MessageDayVolume `json:"volume" validate:"required" description:"One entry per day, oldest first, days without events included."`
}

// MessageDayVolume is one UTC day of MessageDailyVolume: recipients per
// outcome.
type MessageDayVolume struct {
	Date         string `json:"date" validate:"required" format:"date"`
	Sent         int64  `json:"sent" validate:"required"`
	Delivered    int64  `json:"delivered" validate:"required"`
	Deferred     int64  `json:"deferred" validate:"required"`
	Bounced      int64  `json:"bounced" validate:"required"`
	Complained   int64  `json:"complained" validate:"required"`
	Unsubscribed int64  `json:"unsubscribed" validate:"required"`
	Suppressed   int64  `json:"suppressed" validate:"required" description:"Not sent by the provider because of its own suppression list (never counted as bounces)."`
}

func (v *MessageDayVolume) add(typ string, n int64) {
	switch esp.Type(typ) {
	case esp.TypeSent:
		v.Sent += n
	case esp.TypeDelivered:
		v.Delivered += n
	case esp.TypeDeferred:
		v.Deferred += n
	case esp.TypeBounced:
		v.Bounced += n
	case esp.TypeComplained:
		v.Complained += n
	case esp.TypeUnsubscribed:
		v.Unsubscribed += n
	case esp.TypeSuppressed:
		v.Suppressed += n
	}
}

// MessageTypeBreakdownRequest is GET .../messages/type-breakdown.
type MessageTypeBreakdownRequest struct {
	Since *time.Time `query:"since" description:"Count events that happened strictly after this RFC 3339 time (default: the last instant before the UTC hour 30 days ago, so that the default window is whole hours)."`
}

// MessageTypeBreakdown counts message events per outcome and provider.
type MessageTypeBreakdown struct {
	Since time.Time          `json:"since" validate:"required"`
	Total int64              `json:"total" validate:"required"`
	Types []MessageTypeCount `json:"types" validate:"required" description:"Outcomes with at least one event, most frequent first."`
}

// MessageTypeCount is one outcome of MessageTypeBreakdown.
type MessageTypeCount struct {
	EventType  string           `json:"event_type" validate:"required" enum:"sent,delivered,deferred,bounced,complained,unsubscribed,suppressed"`
	Count      int64            `json:"count" validate:"required"`
	ByProvider map[string]int64 `json:"by_provider" validate:"required" description:"Counts per provider kind (ses, sendgrid, ...)."`
}

func (s *Server) messageRoutes() {
	const tag = "messages"
	s.ops.MessageDailyVolume = Handle(s.router, Endpoint[MessageDailyVolumeRequest, MessageDailyVolume]{
		Method: "GET", Path: "/api/accounts/me/messages/daily-volume", OperationID: "messageDailyVolume", Tag: tag,
		Summary:     "Sending-provider message events per UTC day and outcome",
		Description: "Per-recipient events from the account's sending providers, by the provider's event time, over the last `days` UTC days including today; `domain` narrows to one sending domain.",
		Call:        s.messageDailyVolume,
	})
	s.ops.MessageTypeBreakdown = Handle(s.router, Endpoint[MessageTypeBreakdownRequest, MessageTypeBreakdown]{
		Method: "GET", Path: "/api/accounts/me/messages/type-breakdown", OperationID: "messageTypeBreakdown", Tag: tag,
		Summary:     "Sending-provider message events per outcome and provider",
		Description: "Counts since a time (exclusive; default: the last 30 days).",
		Call:        s.messageTypeBreakdown,
	})
}

func (s *Server) messageDailyVolume(ctx context.Context, req *MessageDailyVolumeRequest) (*MessageDailyVolume, error) {
	n := daysParam(req.Days, 7)
	from, to := s.dayRange(n)
	var domain *string
	if req.Domain != nil {
		d, err := domainname.Normalize(*req.Domain)
		if err != nil {
			return nil, InvalidField("domain", err.Error())
		}
		domain = &d
	}
	// Days after today cannot be shown: the window ends with today.
	rows, err := providers.DailyVolume(ctx, s.reads, mustCaller(ctx).AccountID, domain, from, to.AddDate(0, 0, 1))
	if err != nil {
		return nil, err
	}
	out := &MessageDailyVolume{Days: n, From: from.Format(dateLayout), To: to.Format(dateLayout), Domain: domain, Volume: make([]MessageDayVolume, n)}
	index := make(map[string]int, n)
	for i := range out.Volume {
		d := from.AddDate(0, 0, i).Format(dateLayout)
		out.Volume[i].Date = d
		index[d] = i
	}
	for _, r := range rows {
		if i, ok := index[r.Day.Format(dateLayout)]; ok {
			out.Volume[i].add(r.EventType, r.Count)
		}
	}
	return out, nil
}

func (s *Server) messageTypeBreakdown(ctx context.Context, req *MessageTypeBreakdownRequest) (*MessageTypeBreakdown, error) {
	since := rollups.HoursBack(s.now(), typeBreakdownDefault)
	if req.Since != nil {
		since = req.Since.UTC()
	}
	rows, err := providers.TypeBreakdown(ctx, s.reads, mustCaller(ctx).AccountID, since)
	if err != nil {
		return nil, err
	}
	out := &MessageTypeBreakdown{Since: since, Types: []MessageTypeCount{}}
	index := map[string]int{}
	for _, r := range rows {
		i, ok := index[r.EventType]
		if !ok {
			i = len(out.Types)
			index[r.EventType] = i
			out.Types = append(out.Types, MessageTypeCount{EventType: r.EventType, ByProvider: map[string]int64{}})
		}
		out.Types[i].Count += r.Count
		out.Types[i].ByProvider[r.ProviderKind] += r.Count
		out.Total += r.Count
	}
	sort.SliceStable(out.Types, func(a, b int) bool { return out.Types[a].Count > out.Types[b].Count })
	return out, nil
}

// DashboardMessages counts the last 24 hours of sending-provider events.
type DashboardMessages struct {
	Sent          int64   `json:"sent" validate:"required"`
	Delivered     int64   `json:"delivered" validate:"required"`
	Bounced       int64   `json:"bounced" validate:"required" description:"Hard and soft bounces (provider-suppressed sends excluded)."`
	HardBounced   int64   `json:"hard_bounced" validate:"required"`
	Complained    int64   `json:"complained" validate:"required"`
	BounceRate    float64 `json:"bounce_rate" validate:"required" description:"Hard bounces per recipient (the larger of sent and delivered + bounced); 0 without traffic."`
	ComplaintRate float64 `json:"complaint_rate" validate:"required" description:"Complaints per recipient; 0 without traffic."`
}

func (s *Server) fillDashboardMessages(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	c, err := providers.AccountCounts(ctx, s.reads, account, rollups.LastDay(s.now()))
	if err != nil {
		return err
	}
	m := DashboardMessages{Sent: c.Sent, Delivered: c.Delivered, Bounced: c.Bounced, HardBounced: c.HardBounced, Complained: c.Complained}
	m.BounceRate = math.Round(c.Rate(c.HardBounced)*1e6) / 1e6
	m.ComplaintRate = math.Round(c.Rate(c.Complained)*1e6) / 1e6
	out.Messages = m
	return nil
}
