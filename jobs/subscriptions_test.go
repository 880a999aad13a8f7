package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// rotate rotates the subscription's secret as the API does, at now.
func (e *whEnv) rotate(t *testing.T, sub dbsqlc.EventSubscription, grace time.Duration, now time.Time) string {
	t.Helper()
	svc := &subscriptions.Service{Guard: netguard.NewGuard(nil), Keyring: e.keyring, DefaultPlan: plans.Unlimited}
	out, err := svc.Rotate(context.Background(), e.pool, &events.Emitter{River: e.client}, e.account, sub.ID,
		subscriptions.Rotation{Grace: &grace}, now)
	require.NoError(t, err)
	return out.Secret
}

// verifies reports whether the request verifies under secret with the
// official Standard Webhooks library.
func verifies(t *testing.T, secret string, r receivedReq) bool {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return wh.Verify(r.body, r.header) == nil
}

// TestRotationOverlap: during a rotation's grace every push verifies under
// the old secret and the new one; when the grace ends the retire job drops
// the old one and pushes verify under the new secret only.
func TestRotationOverlap(t *testing.T) {
	t.Parallel()
	e := newWHEnvWith(t, nil, Options{Concurrency: 4, Queues: []string{queues.Webhooks, queues.Maintenance}})
	rc := newReceiver(t, nil)
	first := webhook.GenerateSecret()
	id := e.subscribe(t, rc.URL, first, func(p *dbsqlc.SubscriptionInsertParams) {
		p.EventTypes = []string{events.TypeReceiverMessageReceived} // not the rotations' own audit events
	})
	sub, err := subscriptions.Get(context.Background(), e.pool, e.account, id)
	require.NoError(t, err)

	second := e.rotate(t, sub, time.Hour, time.Now())
	ev := e.emit(t, messageEvent(e.account))
	e.waitFor(t, e.only(t, ev.ID).ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
	reqs := rc.requests()
	require.Len(t, reqs, 1)
	require.Len(t, strings.Fields(reqs[0].header.Get("webhook-signature")), 2)
	require.True(t, verifies(t, first, reqs[0]), "the old secret verifies during the grace")
	require.True(t, verifies(t, second, reqs[0]), "the new secret verifies")

	// A rotation whose grace is already over: its retire job is due now.
	third := e.rotate(t, sub, time.Minute, time.Now().Add(-time.Minute))
	require.Eventually(t, func() bool {
		row, err := subscriptions.Get(context.Background(), e.pool, e.account, id)
		require.NoError(t, err)
		return row.PreviousSecretCiphertext == nil && row.PreviousSecretExpiresAt == nil
	}, 30*time.Second, 10*time.Millisecond, "the retire job drops the replaced secret")
	ev = e.emit(t, messageEvent(e.account))
	e.waitFor(t, e.only(t, ev.ID).ID, "delivered", statusIs(deliveries.StatusDelivered, 1))
	reqs = rc.requests()
	require.Len(t, reqs, 2)
	require.Len(t, strings.Fields(reqs[1].header.Get("webhook-signature")), 1)
	require.True(t, verifies(t, third, reqs[1]))
	require.False(t, verifies(t, second, reqs[1]), "a retired secret verifies nothing")
}

// TestSubscriptionBounds: a subscription with max_in_flight never has more
// pushes in flight than that, across the worker's whole concurrency; its
// pushes over the bound wait without using an attempt; and another
// subscription of the same account is not held up behind it.
func TestSubscriptionBounds(t *testing.T) {
	t.Parallel()
	e := newWHEnv(t, nil)
	tp := newTarpit(t)
	fast := newReceiver(t, nil)
	two := int32(2)
	slow := e.subscribe(t, tp.URL, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) { p.MaxInFlight = &two })
	e.subscribe(t, fast.URL, webhook.GenerateSecret(), nil)

	const n = 6
	evs := make([]dbsqlc.Event, n)
	for i := range evs {
		evs[i] = e.emit(t, messageEvent(e.account))
	}
	// Every push of the unbounded subscription arrives while the bounded
	// one's endpoint holds its two.
	require.Eventually(t, func() bool { return len(fast.requests()) == n }, 60*time.Second, 10*time.Millisecond)
	tp.waitUntil(t, "two pushes in flight", func(c tarpitCounts) bool { return c.inFlight == 2 })
	var waited int
	require.Eventually(t, func() bool {
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job j
			JOIN webhook_deliveries d ON d.job_id = j.id
			WHERE d.subscription_id = $1 AND (j.metadata->>'fair_waits')::int > 0`, slow).Scan(&waited))
		return waited > 0
	}, 60*time.Second, 10*time.Millisecond, "the pushes over the bound wait")
	tp.open()
	for _, ev := range evs {
		for _, d := range e.deliveriesOf(t, ev.ID) {
			if d.SubscriptionID == slow {
				e.waitFor(t, d.ID, "delivered with one attempt", statusIs(deliveries.StatusDelivered, 1))
			}
		}
	}
	c := tp.counts()
	require.Equal(t, 2, c.maxInFlight, "never more than max_in_flight at once")
	require.Equal(t, n, c.answered)
	var leases int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM subscription_push_leases`).Scan(&leases))
	require.Zero(t, leases, "every slot is freed")
}
