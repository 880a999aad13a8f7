package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Result is the outcome of Deliver: an attempt, or why nothing was sent.
type Result struct {
	Attempt
	// Skipped says why nothing was sent (the channel or the event is
	// gone, nothing to send); "" when a send was attempted.
	Skipped string
	// Action is the PagerDuty action sent (trigger or resolve).
	Action string
	// Busy is set when the send was not made because the account's or
	// the destination host's sends in flight are at their bound
	// (Service.Admit); nothing is recorded, the caller waits its turn.
	Busy error
}

// request is one send: where, what, and for PagerDuty which action.
type request struct {
	url    string
	body   []byte
	action string
}

// Deliver sends event eventID to channel channelID as both are now, and
// records the outcome on the channel (failing_since, last_error,
// last_success_at), raising notification_channel_failing once a channel
// has failed for FailingAfter and notification_channel_recovered when it
// next succeeds. A PagerDuty channel is sent the current state of the
// alert the event is or names: resolve when it is acknowledged, trigger
// otherwise, so that sends run in any order converge. em emits in the
// recording transaction (nil: the River client of ctx).
func (s *Service) Deliver(ctx context.Context, db dbutil.Executor, em *events.Emitter, channelID, eventID uuid.UUID, now time.Time) (Result, error) {
	q := dbsqlc.New()
	ch, err := q.ChannelGet(ctx, db, channelID)
	if dbutil.IsNotFound(err) {
		return Result{Skipped: "the channel was deleted"}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("reading notification channel: %w", err)
	}
	ev, err := q.EventGetForNotification(ctx, db, eventID)
	if dbutil.IsNotFound(err) {
		return Result{Skipped: "the event was pruned"}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("reading event: %w", err)
	}
	if ev.AccountID != ch.AccountID {
		return Result{Skipped: "the event is another account's"}, nil
	}
	dest, err := s.open(ch)
	if err != nil {
		// The key ring lost the key: an operator can fix it, so retry.
		res := Result{Attempt: errorf(true, "%s", ErrSecretUnreadable.Error())}
		return res, s.record(ctx, db, em, ch, res.Attempt, now)
	}
	req, skipped, err := s.build(ctx, db, ch, dest, ev)
	if err != nil || skipped != "" {
		return Result{Skipped: skipped}, err
	}
	if s.Admit != nil {
		release, busy := s.Admit(ch.AccountID, req.url)
		if busy != nil {
			return Result{Busy: busy}, nil
		}
		defer release()
	}
	res := Result{Attempt: s.post(ctx, ch.Kind, req.url, req.body, now), Action: req.action}
	return res, s.record(ctx, db, em, ch, res.Attempt, now)
}

// build makes the request of ev for ch.
func (s *Service) build(ctx context.Context, db dbsqlc.DBTX, ch dbsqlc.NotificationChannel, dest destination, ev dbsqlc.Event) (request, string, error) {
	if ch.Kind != KindPagerDuty {
		body, err := s.payload(ch.Kind, MessageOf(ev, s.BaseURL))
		return request{url: dest.URL, body: body}, "", err
	}
	alert := ev
	if ev.Severity != string(events.SeverityCritical) {
		id, ok := alertNamed(ev)
		if !ok {
			return request{}, "PagerDuty channels are sent alerts only", nil
		}
		var err error
		alert, err = dbsqlc.New().EventGetForNotification(ctx, db, id)
		if dbutil.IsNotFound(err) {
			return request{}, "the alert was pruned", nil
		}
		if err != nil {
			return request{}, "", fmt.Errorf("reading alert: %w", err)
		}
		if alert.AccountID != ch.AccountID {
			return request{}, "the alert is another account's", nil
		}
	}
	action := ActionTrigger
	if alert.AcknowledgedAt != nil {
		action = ActionResolve
	}
	body, err := PagerDutyPayload(dest.RoutingKey, action, MessageOf(alert, s.BaseURL))
	return request{url: dest.URL, body: body, action: action}, "", err
}

// alertNamed is the alert an acknowledgement event is about.
func alertNamed(ev dbsqlc.Event) (uuid.UUID, bool) {
	if ev.EventType != events.TypeAlertAcknowledged && ev.EventType != events.TypeAlertUnacknowledged {
		return uuid.Nil, false
	}
	var p struct {
		AlertID uuid.UUID `json:"alert_id"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.AlertID == uuid.Nil {
		return uuid.Nil, false
	}
	return p.AlertID, true
}

// payload is the Slack or Teams body of m.
func (s *Service) payload(kind string, m Message) ([]byte, error) {
	if kind == KindTeams {
		return TeamsPayload(m)
	}
	return SlackPayload(m)
}

// failurePayload is the payload of notification_channel_failing and
// notification_channel_recovered.
type failurePayload struct {
	ChannelID    uuid.UUID  `json:"channel_id"`
	Kind         string     `json:"kind"`
	Label        string     `json:"label,omitempty"`
	Destination  string     `json:"destination"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	LastError    *string    `json:"last_error,omitempty"`
}

// record writes a's outcome on ch, with the failing or recovered event in
// the same transaction.
func (s *Service) record(ctx context.Context, db dbutil.Executor, em *events.Emitter, ch dbsqlc.NotificationChannel, a Attempt, now time.Time) error {
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		q := dbsqlc.New()
		p := failurePayload{ChannelID: ch.ID, Kind: ch.Kind, Label: ch.Label, Destination: ch.Destination}
		typ := events.TypeNotificationChannelRecovered
		if a.Delivered {
			notified, err := q.ChannelRecordSuccess(ctx, tx, dbsqlc.ChannelRecordSuccessParams{ID: ch.ID, Now: now})
			if dbutil.IsNotFound(err) || (err == nil && !notified) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("recording channel success: %w", err)
			}
			p.FailingSince = ch.FailingSince
		} else {
			row, err := q.ChannelRecordFailure(ctx, tx, dbsqlc.ChannelRecordFailureParams{
				ID: ch.ID, Now: now, LastError: a.Error, FailingCutoff: now.Add(-FailingAfter),
			})
			if dbutil.IsNotFound(err) || (err == nil && !row.Notify) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("recording channel failure: %w", err)
			}
			typ, p.FailingSince, p.LastError = events.TypeNotificationChannelFailing, &row.FailingSince, &a.Error
		}
		if _, err := em.Emit(ctx, tx, events.Event{AccountID: ch.AccountID, Type: typ, Payload: p, At: now}); err != nil {
			return fmt.Errorf("emitting %s: %w", typ, err)
		}
		return nil
	})
}

// Test sends a test message to the account's channel id now, through the
// same checks and client as every send, and returns the outcome; nothing
// is recorded or retried. A PagerDuty channel gets an info trigger,
// resolved at once when it was accepted.
func (s *Service) Test(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID, now time.Time) (Attempt, error) {
	ch, err := Get(ctx, db, accountID, id)
	if err != nil {
		return Attempt{}, err
	}
	dest, err := s.open(ch)
	if err != nil {
		return Attempt{}, err
	}
	m := Message{
		EventID: ch.ID, Type: "test", Group: "test", Title: "mailwatch test message", Severity: string(events.SeverityInfo),
		Summary:     "This channel is connected",
		Description: "mailwatch sends the events this channel's filters select here.", At: now.UTC(),
		Link: s.BaseURL + "/settings",
	}
	if ch.Kind != KindPagerDuty {
		body, err := s.payload(ch.Kind, m)
		if err != nil {
			return Attempt{}, err
		}
		return s.post(ctx, ch.Kind, dest.URL, body, now), nil
	}
	body, err := PagerDutyPayload(dest.RoutingKey, ActionTrigger, m)
	if err != nil {
		return Attempt{}, err
	}
	a := s.post(ctx, ch.Kind, dest.URL, body, now)
	if a.Delivered {
		resolve, err := PagerDutyPayload(dest.RoutingKey, ActionResolve, m)
		if err != nil {
			return a, err
		}
		_ = s.post(ctx, ch.Kind, dest.URL, resolve, now)
	}
	return a, nil
}

// alertPruneBatch is how many records one DELETE of PruneAlerts removes.
const alertPruneBatch = 5000

// PruneAlerts deletes the records of PagerDuty sends (which channels get
// an alert's resolve) whose alert is gone, recorded before before, batch
// by batch; it returns how many it deleted. The event prune job calls it
// after pruning events.
func PruneAlerts(ctx context.Context, db dbsqlc.DBTX, before time.Time) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := dbsqlc.New().ChannelAlertPrune(ctx, db, dbsqlc.ChannelAlertPruneParams{Before: before, BatchSize: alertPruneBatch})
		if err != nil {
			return total, fmt.Errorf("pruning notification channel alert records: %w", err)
		}
		total += n
		if n < alertPruneBatch {
			return total, nil
		}
	}
}
