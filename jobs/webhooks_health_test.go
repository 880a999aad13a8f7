package jobs

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// TestSubscriptionFailingAndRecovered: a subscription whose pushes all
// fail for a day raises subscription_failing once per failing period
// (its own delivery of that event, failing too, raises nothing more), and
// subscription_recovered at its next accepted push. The worker's clock
// (Deps.Now) is moved instead of waiting a day.
func TestSubscriptionFailingAndRecovered(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newWHEnv(t, func(d *Deps) { d.Now = now })
	var code atomic.Int32
	code.Store(http.StatusInternalServerError)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) })
	// Every event type, subscription_failing included: it is pushed to the
	// failing endpoint as well.
	sub := e.subscribe(t, rc.URL, webhook.GenerateSecret(), nil)
	ctx := context.Background()
	subRow := func() dbsqlc.EventSubscription {
		row, err := dbsqlc.New().SubscriptionGetByID(ctx, e.pool, dbsqlc.SubscriptionGetByIDParams{ID: sub, AccountID: e.account})
		require.NoError(t, err)
		return row
	}
	// push emits an event at the clock's offset and waits for its outcome.
	push := func(at time.Duration, status string) {
		t.Helper()
		offset.Store(int64(at))
		ev := e.emit(t, messageEvent(e.account))
		e.waitFor(t, e.only(t, ev.ID).ID, status, statusIs(status, 1))
	}

	push(0, deliveries.StatusRetrying)
	start := subRow().FailingSince
	require.NotNil(t, start)
	push(2*time.Hour, deliveries.StatusRetrying)
	require.Zero(t, e.countEvents(t, events.TypeSubscriptionFailing), "failing for less than a day")

	push(25*time.Hour, deliveries.StatusRetrying)
	require.Equal(t, 1, e.countEvents(t, events.TypeSubscriptionFailing))
	var payload deliveries.FailingPayload
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2",
		e.account, events.TypeSubscriptionFailing).Scan(&payload))
	require.Equal(t, sub, payload.SubscriptionID)
	require.WithinDuration(t, *start, payload.FailingSince, time.Millisecond)
	require.WithinDuration(t, start.Add(deliveries.FailingDisableAfter), payload.DisablesAt, time.Millisecond)
	require.Equal(t, rc.URL, payload.URL)
	// Its own push to the failing endpoint fails and raises nothing more.
	failing := e.waitForEventDelivery(t, events.TypeSubscriptionFailing, sub)
	e.waitFor(t, failing, "retrying", statusIs(deliveries.StatusRetrying, 1))
	push(26*time.Hour, deliveries.StatusRetrying)
	require.Equal(t, 1, e.countEvents(t, events.TypeSubscriptionFailing), "once per failing period")
	require.True(t, subRow().Enabled)

	code.Store(http.StatusOK)
	push(26*time.Hour+time.Minute, deliveries.StatusDelivered)
	require.Eventually(t, func() bool { return e.countEvents(t, events.TypeSubscriptionRecovered) == 1 }, 20*time.Second, 10*time.Millisecond)
	var rec deliveries.RecoveredPayload
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2",
		e.account, events.TypeSubscriptionRecovered).Scan(&rec))
	require.WithinDuration(t, *start, rec.FailingSince, time.Millisecond)
	row := subRow()
	require.Nil(t, row.FailingSince)
	require.Nil(t, row.FailingNotifiedAt)
	push(26*time.Hour+2*time.Minute, deliveries.StatusDelivered)
	require.Equal(t, 1, e.countEvents(t, events.TypeSubscriptionRecovered), "one recovery per failing period")

	// A new failing period is notified again, a day after its own start.
	code.Store(http.StatusInternalServerError)
	push(27*time.Hour, deliveries.StatusRetrying)
	require.Equal(t, 1, e.countEvents(t, events.TypeSubscriptionFailing))
	push(52*time.Hour, deliveries.StatusRetrying)
	require.Equal(t, 2, e.countEvents(t, events.TypeSubscriptionFailing))
}

// waitForEventDelivery returns the delivery to sub of the (only) event of
// type typ.
func (e *whEnv) waitForEventDelivery(t *testing.T, typ string, sub uuid.UUID) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.Eventually(t, func() bool {
		err := e.pool.QueryRow(context.Background(), "SELECT id FROM webhook_deliveries WHERE account_id = $1 AND event_type = $2 AND subscription_id = $3",
			e.account, typ, sub).Scan(&id)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond)
	return id
}
