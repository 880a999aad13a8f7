package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// DeliveryKind is the River job kind that pushes one webhook delivery.
const DeliveryKind = "webhook_delivery"

// DeliveryArgs are the arguments of a webhook delivery job: the delivery id
// only. The worker (jobs/webhooks.go) reads the delivery and its
// subscription when it runs. The type lives here, beside the fan-out that
// inserts it, because the jobs package depends on this one.
type DeliveryArgs struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (DeliveryArgs) Kind() string { return DeliveryKind }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DeliveryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Webhooks, MaxAttempts: webhook.MaxAttempts}
}

// DeliveryTags are the River tags of a delivery job, so that River UI's
// tag filter finds one customer's, one type's or one subscription's jobs:
// "account-<id>", "event-<type>" and "subscription-<id>". River accepts
// tags of word characters and hyphens, up to 255 characters; event type
// names are lower-case words joined by underscores.
func DeliveryTags(accountID uuid.UUID, eventType string, subscriptionID uuid.UUID) []string {
	return []string{deliveryTagAccount + accountID.String(), "event-" + eventType, "subscription-" + subscriptionID.String()}
}

// deliveryTagAccount prefixes the account's id in a delivery job's tags.
const deliveryTagAccount = "account-"

// DeliveryTagAccount returns the account named by a delivery job's tags
// (DeliveryTags), if they name one.
func DeliveryTagAccount(tags []string) (uuid.UUID, bool) {
	for _, tag := range tags {
		if rest, ok := strings.CutPrefix(tag, deliveryTagAccount); ok {
			if id, err := uuid.Parse(rest); err == nil {
				return id, true
			}
		}
	}
	return uuid.Nil, false
}

// PushedEvent is the "data" of a pushed event: the event as the API shows it.
type PushedEvent struct {
	ID        uuid.UUID       `json:"id"`
	EventType string          `json:"event_type"`
	Severity  string          `json:"severity"`
	Domain    *string         `json:"domain"`
	Tags      []string        `json:"tags"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// PushBody builds the Standard Webhooks body of ev: {"type", "timestamp",
// "data": <event>}.
func PushBody(ev dbsqlc.Event) ([]byte, error) {
	tags := ev.Tags
	if tags == nil {
		tags = []string{}
	}
	return webhook.Payload(ev.EventType, ev.CreatedAt, PushedEvent{
		ID: ev.ID, EventType: ev.EventType, Severity: ev.Severity, Domain: ev.Domain, Tags: tags,
		Payload: ev.Payload, CreatedAt: ev.CreatedAt.UTC(),
	})
}

// fanOut creates the deliveries of ev for every matching, enabled
// subscription, in the emitting transaction: one delivery row (status
// pending, the body built once) and one River job each, inserted together
// with InsertManyTx. A rolled-back event therefore leaves neither rows nor
// jobs behind. One query reads the matching subscriptions and the
// account's preferences for the type (Resolve decides each channel): a
// webhook channel that resolves off creates no delivery, and an alert
// whose email channel resolves on is mailed by an AlertEmailArgs job,
// inserted here too, when the account has a verified address. The
// account's matching notification channels (channels.go) get one
// ChannelSendArgs job each.
func (e *Emitter) fanOut(ctx context.Context, tx pgx.Tx, ev dbsqlc.Event) error {
	q := dbsqlc.New()
	t, _ := Lookup(ev.EventType)
	in, err := q.PreferenceEmitInputs(ctx, tx, dbsqlc.PreferenceEmitInputsParams{
		AccountID: ev.AccountID, EventType: ev.EventType, GroupName: t.Group, Domain: ev.Domain, Tags: ev.Tags,
	})
	if err != nil {
		return fmt.Errorf("error selecting subscriptions and preferences of event: %w", err)
	}
	required := Required(ev.EventType)
	subs := in.SubscriptionIds
	if !Resolve(required, ChannelPrefs{Muted: in.MuteWebhook, Override: in.OverrideWebhook, Group: in.GroupWebhook}).Send {
		subs = nil
	}
	mail := ev.Severity == string(SeverityCritical) && in.HasVerifiedAddress &&
		Resolve(required, ChannelPrefs{Muted: in.MuteEmail, Override: in.OverrideEmail, Group: in.GroupEmail}).Send
	chans, err := channelTargets(ctx, tx, ev, t.Group, required, in.HasChannels)
	if err != nil {
		return err
	}
	if len(subs) == 0 && !mail && len(chans) == 0 {
		return nil
	}
	client, err := e.client(ctx)
	if err != nil {
		return err
	}
	if err := insertChannelSends(ctx, client, tx, ev, chans); err != nil {
		return err
	}
	if mail {
		if _, err := client.InsertTx(ctx, tx, AlertEmailArgs{EventID: ev.ID}, &river.InsertOpts{
			Tags: []string{"account-" + ev.AccountID.String(), "event-" + ev.EventType},
		}); err != nil {
			return fmt.Errorf("error enqueueing alert email: %w", err)
		}
	}
	if len(subs) == 0 {
		return nil
	}
	body, err := PushBody(ev)
	if err != nil {
		return fmt.Errorf("error building webhook body: %w", err)
	}
	ids := make([]uuid.UUID, len(subs))
	params := make([]river.InsertManyParams, len(subs))
	for i := range subs {
		ids[i] = uuid.Must(uuid.NewV7())
		params[i] = river.InsertManyParams{Args: DeliveryArgs{DeliveryID: ids[i]}, InsertOpts: &river.InsertOpts{
			Tags: DeliveryTags(ev.AccountID, ev.EventType, subs[i]),
		}}
	}
	res, err := client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("error enqueueing webhook deliveries: %w", err)
	}
	jobIDs := make([]int64, len(res))
	for i, r := range res {
		jobIDs[i] = r.Job.ID
	}
	if err := q.DeliveryInsertMany(ctx, tx, dbsqlc.DeliveryInsertManyParams{
		AccountID: ev.AccountID, EventID: ev.ID, EventType: ev.EventType, Body: body,
		Ids: ids, SubscriptionIds: subs, JobIds: jobIDs,
	}); err != nil {
		return fmt.Errorf("error inserting webhook deliveries: %w", err)
	}
	return nil
}
