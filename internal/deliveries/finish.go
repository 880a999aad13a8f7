package deliveries

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Delivered is one accepted push to record (RecordDelivered).
type Delivered struct {
	DeliveryID, AttemptID, SubscriptionID uuid.UUID
	FinishedAt                            time.Time
	Attempt                               webhook.Attempt
}

// RecordDelivered records accepted pushes in one statement: the common
// outcome. A delivery deleted meanwhile (with its subscription) has
// nothing left to record and is skipped. It returns the subscriptions of
// ins that had raised subscription_failing: their failing period is left
// for NotifyRecovered to end.
func RecordDelivered(ctx context.Context, db dbutil.Executor, ins []Delivered, now time.Time) ([]uuid.UUID, error) {
	n := len(ins)
	p := dbsqlc.DeliveryFinishDeliveredManyParams{
		Ids: make([]uuid.UUID, n), AttemptIds: make([]uuid.UUID, n), SubscriptionIds: make([]uuid.UUID, n),
		FinishedAt: make([]time.Time, n), StatusCodes: make([]int32, n), DurationsMs: make([]int32, n),
		ResponseBodies: make([]string, n), ResponseTruncated: make([]bool, n),
		StaleBefore: now.Add(-time.Minute),
	}
	for i, in := range ins {
		p.Ids[i], p.AttemptIds[i], p.SubscriptionIds[i], p.FinishedAt[i] = in.DeliveryID, in.AttemptID, in.SubscriptionID, in.FinishedAt
		p.StatusCodes[i], p.DurationsMs[i] = int32(in.Attempt.StatusCode), int32(in.Attempt.Duration.Milliseconds())
		p.ResponseBodies[i], p.ResponseTruncated[i] = in.Attempt.ResponseBody, in.Attempt.ResponseTruncated
	}
	rows, err := dbsqlc.New().DeliveryFinishDeliveredMany(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("error recording delivery: %w", err)
	}
	var recovering []uuid.UUID
	for _, r := range rows {
		if r.Notified && !slices.Contains(recovering, r.SubscriptionID) {
			recovering = append(recovering, r.SubscriptionID)
		}
	}
	return recovering, nil
}

// JobCanceller cancels a River job in the caller's transaction
// (*river.Client[pgx.Tx] is one).
type JobCanceller interface {
	JobCancelTx(ctx context.Context, tx pgx.Tx, jobID int64) (*rivertype.JobRow, error)
}

// FinishParams is one attempt's outcome to record (Finish).
type FinishParams struct {
	Started *Started
	Attempt webhook.Attempt
	Outcome Outcome
	// JobID is the job that ran the attempt; Cancel cancels it when the
	// outcome says so (nil is an error then).
	JobID  int64
	Cancel JobCanceller
	Now    time.Time
	Logger *slog.Logger
	// Recovered: the job was queued by a recovery (Recovered); a delivery
	// ending failed again emits nothing, having reported it before.
	Recovered bool
}

// Finish records in tx the outcome of an attempt that was not accepted
// (accepted ones go through RecordDelivered): the attempt and delivery
// rows, the subscription's failing state, its auto-disable (410 Gone, or
// every push failing for FailingDisableAfter), the job's cancellation and
// webhook_delivery_failed when the delivery ends failed.
func Finish(ctx context.Context, tx pgx.Tx, p FinishParams) error {
	q := dbsqlc.New()
	st, a, oc, now := p.Started, p.Attempt, p.Outcome, p.Now
	d, err := q.DeliveryFinishAttempt(ctx, tx, dbsqlc.DeliveryFinishAttemptParams{
		ID: st.Delivery.ID, AttemptID: st.AttemptID, SubscriptionID: st.Sub.ID, FinishedAt: now, StaleBefore: now.Add(-time.Minute),
		Status: oc.Status, Uncount: oc.Uncount, StatusCode: nonZero(int32(a.StatusCode)), ErrorClass: nonEmpty(a.ErrorClass),
		Error: nonEmpty(a.Error), DurationMs: int32(a.Duration.Milliseconds()), ResponseBody: nonEmpty(a.ResponseBody),
		ResponseTruncated: a.ResponseTruncated, NextRetryAt: oc.NextRetry,
	})
	if err != nil {
		return fmt.Errorf("error recording outcome: %w", err)
	}
	if oc.Uncount {
		if oc.Snooze > 0 {
			// An endpoint that only ever asks to wait is failing too: it
			// must still reach the 5-day disable.
			if err := q.SubscriptionMarkFailing(ctx, tx, dbsqlc.SubscriptionMarkFailingParams{ID: st.Sub.ID, Now: now}); err != nil {
				return fmt.Errorf("error recording failure: %w", err)
			}
		}
		return nil
	}
	if err := recordFailing(ctx, tx, p.Logger, st.Sub, a, oc, now); err != nil {
		return err
	}
	if a.ErrorClass == webhook.ErrorClassBlockedDestination && p.Logger != nil {
		// The customer reads what to do; the operator, what would admit it.
		p.Logger.InfoContext(ctx, "webhook destination refused", slog.String("delivery_id", d.ID.String()),
			slog.String("reason", a.Error), slog.String("operator_hint", "the server's "+netguard.EnvAllowedCIDRs+
				" setting admits private or reserved destinations"))
	}
	if oc.CancelJob {
		// Marks the running job for cancellation in this transaction, so
		// that if the process dies before River records the cancellation,
		// the rescuer cancels it instead of running it again.
		if p.Cancel == nil {
			return fmt.Errorf("error cancelling job %d: no River client", p.JobID)
		}
		if _, err := p.Cancel.JobCancelTx(ctx, tx, p.JobID); err != nil {
			return fmt.Errorf("error cancelling job: %w", err)
		}
	}
	if oc.Status == StatusFailed && !p.Recovered {
		return EmitFailed(ctx, tx, &events.Emitter{}, d, st.Sub)
	}
	return nil
}

// recordFailing disables the subscription when the outcome says so, or
// marks it failing after a failed push, disables it when every push
// failed for FailingDisableAfter, and raises subscription_failing once
// they all failed for FailingNotifyAfter (notifyFailing).
func recordFailing(ctx context.Context, tx pgx.Tx, log *slog.Logger, sub dbsqlc.EventSubscription, a webhook.Attempt, oc Outcome, now time.Time) error {
	if oc.Disable != "" {
		return DisableSubscription(ctx, tx, log, sub, oc.Disable, now, nil)
	}
	if a.ErrorClass == "" {
		return nil
	}
	if err := dbsqlc.New().SubscriptionMarkFailing(ctx, tx, dbsqlc.SubscriptionMarkFailingParams{ID: sub.ID, Now: now}); err != nil {
		return fmt.Errorf("error recording failure: %w", err)
	}
	cutoff := now.Add(-FailingDisableAfter)
	if err := DisableSubscription(ctx, tx, log, sub, "every delivery failed for 5 days", now, &cutoff); err != nil {
		return err
	}
	return notifyFailing(ctx, tx, sub, now)
}

// DisableSubscription disables sub (when still enabled and, with
// failingBefore, failing since before it) and emits subscription_disabled.
func DisableSubscription(ctx context.Context, tx pgx.Tx, log *slog.Logger, sub dbsqlc.EventSubscription, reason string, now time.Time, failingBefore *time.Time) error {
	_, err := dbsqlc.New().SubscriptionDisable(ctx, tx, dbsqlc.SubscriptionDisableParams{
		ID: sub.ID, Reason: reason, Now: now, FailingBefore: failingBefore,
	})
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error disabling subscription: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "subscription disabled", slog.String("subscription_id", sub.ID.String()), slog.String("reason", reason))
	if _, err := (&events.Emitter{}).Emit(ctx, tx, events.Event{
		AccountID: sub.AccountID, Type: events.TypeSubscriptionDisabled,
		Payload: map[string]any{"subscription_id": sub.ID, "url": redactURL(sub.URL), "reason": reason},
	}); err != nil {
		return fmt.Errorf("error emitting subscription_disabled: %w", err)
	}
	return nil
}

// EmitFailed emits webhook_delivery_failed for a delivery that ended
// failed, carrying the original event's domain and tags so that filtered
// subscriptions see it. A failed delivery of a webhook_delivery_failed
// event emits nothing: no cascades.
func EmitFailed(ctx context.Context, tx pgx.Tx, em *events.Emitter, d dbsqlc.WebhookDelivery, sub dbsqlc.EventSubscription) error {
	if d.EventType == events.TypeWebhookDeliveryFailed {
		return nil
	}
	ev := events.Event{AccountID: d.AccountID, Type: events.TypeWebhookDeliveryFailed}
	if orig, err := dbsqlc.New().EventGetByID(ctx, tx, dbsqlc.EventGetByIDParams{ID: d.EventID, AccountID: d.AccountID}); err == nil {
		if orig.Domain != nil {
			ev.Domain = *orig.Domain
		}
		ev.Tags = orig.Tags
	} else if !dbutil.IsNotFound(err) {
		return fmt.Errorf("error reading delivered event: %w", err)
	}
	var code any
	if d.LastStatusCode != nil {
		code = *d.LastStatusCode
	}
	ev.Payload = map[string]any{
		"delivery_id": d.ID, "subscription_id": d.SubscriptionID, "event_id": d.EventID, "event_type": d.EventType,
		"url": redactURL(sub.URL), "attempts": d.Attempts, "last_status_code": code, "last_error": d.LastError,
	}
	if _, err := em.Emit(ctx, tx, ev); err != nil {
		return fmt.Errorf("error emitting webhook_delivery_failed: %w", err)
	}
	return nil
}

// redactURL drops what may carry credentials (userinfo, query, fragment)
// from a subscription URL before it goes into an event payload: those
// events are pushed to the account's other endpoints.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	u.ForceQuery = false
	return u.String()
}

func nonZero(v int32) *int32 {
	if v == 0 {
		return nil
	}
	return &v
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
