package deliveries

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// FailingNotifyAfter is how long every push of a subscription must have
// failed, without one success, before subscription_failing is raised: once
// per failing period, well before the disable at FailingDisableAfter.
const FailingNotifyAfter = 24 * time.Hour

// FailingPayload is the payload of subscription_failing.
type FailingPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	URL            string    `json:"url"`
	FailingSince   time.Time `json:"failing_since"`
	DisablesAt     time.Time `json:"disables_at"`
}

// RecoveredPayload is the payload of subscription_recovered.
type RecoveredPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	URL            string    `json:"url"`
	FailingSince   time.Time `json:"failing_since"`
	RecoveredAt    time.Time `json:"recovered_at"`
}

// notifyFailing raises subscription_failing, in tx, for a subscription
// still enabled whose pushes have all failed for FailingNotifyAfter, once
// per failing period (failing_notified_at). Its own delivery to the
// failing subscription cannot loop: failing again, it finds the period
// already notified.
func notifyFailing(ctx context.Context, tx pgx.Tx, sub dbsqlc.EventSubscription, now time.Time) error {
	row, err := dbsqlc.New().SubscriptionMarkFailingNotified(ctx, tx, dbsqlc.SubscriptionMarkFailingNotifiedParams{
		ID: sub.ID, Now: now, FailingBefore: now.Add(-FailingNotifyAfter),
	})
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error marking subscription failing: %w", err)
	}
	since := row.FailingSince.UTC()
	if _, err := (&events.Emitter{}).Emit(ctx, tx, events.Event{
		AccountID: row.AccountID, Type: events.TypeSubscriptionFailing, At: now,
		Payload: FailingPayload{SubscriptionID: row.ID, URL: redactURL(row.URL), FailingSince: since,
			DisablesAt: since.Add(FailingDisableAfter)},
	}); err != nil {
		return fmt.Errorf("error emitting subscription_failing: %w", err)
	}
	return nil
}

// NotifyRecovered ends, in its own transaction on db, the notified failing
// period of a subscription whose push was accepted at now (RecordDelivered
// names those) and raises subscription_recovered. Of concurrent calls for
// one subscription exactly one raises it. em's River client fans the event
// out (nil: the one in ctx, inside a River worker).
func NotifyRecovered(ctx context.Context, db dbutil.Executor, em *events.Emitter, subID uuid.UUID, now time.Time) error {
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		row, err := dbsqlc.New().SubscriptionRecover(ctx, tx, dbsqlc.SubscriptionRecoverParams{ID: subID, SucceededAt: now})
		if dbutil.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error recording recovery: %w", err)
		}
		var since time.Time
		if row.PreviousFailingSince != nil {
			since = row.PreviousFailingSince.UTC()
		}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: row.AccountID, Type: events.TypeSubscriptionRecovered, At: now,
			Payload: RecoveredPayload{SubscriptionID: row.ID, URL: redactURL(row.URL), FailingSince: since, RecoveredAt: now.UTC()},
		}); err != nil {
			return fmt.Errorf("error emitting subscription_recovered: %w", err)
		}
		return nil
	})
}
