package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// ChannelSendKind is the River job kind that sends one event to one
// notification channel (Slack, Microsoft Teams, PagerDuty).
const ChannelSendKind = "channel_send"

// ChannelSendMaxAttempts bounds a channel send's attempts: 429, 5xx and
// network errors are retried (honouring Retry-After), other answers are
// final.
const ChannelSendMaxAttempts = 10

// ChannelSendArgs send one event to one notification channel: ids only.
// The worker (jobs/channels.go, rules in internal/channels) reads the
// channel, the event and, for PagerDuty, the alert's acknowledgement when
// it runs. The type lives here, beside the fan-out that inserts it, because
// internal/channels depends on this package.
type ChannelSendArgs struct {
	ChannelID uuid.UUID `json:"channel_id"`
	EventID   uuid.UUID `json:"event_id"`
}

// Kind implements river.JobArgs.
func (ChannelSendArgs) Kind() string { return ChannelSendKind }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ChannelSendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Webhooks, MaxAttempts: ChannelSendMaxAttempts}
}

// ChannelSendTags are the River tags of a channel send:
// "account-<id>", "channel-<id>" and "event-<type>".
func ChannelSendTags(accountID, channelID uuid.UUID, eventType string) []string {
	return []string{deliveryTagAccount + accountID.String(), "channel-" + channelID.String(), "event-" + eventType}
}

// channelEventPrefix starts the types about notification channels
// themselves, which never go to channels (no cascades).
const channelEventPrefix = "notification_channel_"

// channelTargets selects the notification channels ev goes to, in the
// emitting transaction (query ChannelEmitTargets). An alert's
// acknowledgement events name the alert, so that the PagerDuty channels
// that were sent it get a resolve or a re-trigger.
// An account without channels (hasChannels false, from
// PreferenceEmitInputs) costs no query.
func channelTargets(ctx context.Context, tx pgx.Tx, ev dbsqlc.Event, group string, required, hasChannels bool) ([]uuid.UUID, error) {
	if !hasChannels || strings.HasPrefix(ev.EventType, channelEventPrefix) {
		return nil, nil
	}
	var alertID *uuid.UUID
	if ev.EventType == TypeAlertAcknowledged || ev.EventType == TypeAlertUnacknowledged {
		var p struct {
			AlertID uuid.UUID `json:"alert_id"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err == nil && p.AlertID != uuid.Nil {
			alertID = &p.AlertID
		}
	}
	ids, err := dbsqlc.New().ChannelEmitTargets(ctx, tx, dbsqlc.ChannelEmitTargetsParams{
		AccountID: ev.AccountID, Severity: ev.Severity, Required: required, GroupName: group,
		Domain: ev.Domain, Tags: ev.Tags, AlertID: alertID, EventID: ev.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("error selecting notification channels of event: %w", err)
	}
	return ids, nil
}

// insertChannelSends inserts one ChannelSendArgs job per channel.
func insertChannelSends(ctx context.Context, client *river.Client[pgx.Tx], tx pgx.Tx, ev dbsqlc.Event, channels []uuid.UUID) error {
	if len(channels) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(channels))
	for i, id := range channels {
		params[i] = river.InsertManyParams{Args: ChannelSendArgs{ChannelID: id, EventID: ev.ID},
			InsertOpts: &river.InsertOpts{Tags: ChannelSendTags(ev.AccountID, id, ev.EventType)}}
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("error enqueueing notification channel sends: %w", err)
	}
	return nil
}
