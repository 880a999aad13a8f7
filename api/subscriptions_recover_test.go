package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// setupRecover is setupWebhooks with a worker that also works the
// maintenance queue, where recoveries run.
func setupRecover(t *testing.T) *webhookBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32)) // the harness's key
	require.NoError(t, err)
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keyring: keyring,
		WebhookClient: webhook.NewClient(testGuard(t), webhook.ClientOptions{}),
	}, jobs.Options{Concurrency: 10, Queues: []string{queues.Webhooks, queues.Maintenance}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(ctx)
	})
	return &webhookBundle{testBundle: b, worker: worker}
}

type recoveryJSON struct {
	JobID          int64     `json:"job_id"`
	SubscriptionID string    `json:"subscription_id"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
	AlreadyQueued  bool      `json:"already_queued"`
}

// recoverDone waits for the recovery's job to complete and returns its
// output.
func (b *webhookBundle) recoverDone(t *testing.T, job int64) deliveries.RecoverOutput {
	t.Helper()
	var row *rivertype.JobRow
	require.Eventually(t, func() bool {
		var err error
		row, err = b.worker.JobGet(context.Background(), job)
		require.NoError(t, err)
		return row.State == rivertype.JobStateCompleted
	}, 20*time.Second, 10*time.Millisecond, "the recovery job never completed")
	require.Equal(t, "webhook_recover", row.Kind)
	var out deliveries.RecoverOutput
	require.NoError(t, json.Unmarshal(row.Output(), &out), "the job records its output: %s", row.Metadata)
	return out
}

// TestSubscriptionRecover: a subscription whose endpoint answered 500
// has failed deliveries; once the endpoint is healthy, recovering a time
// range pushes again exactly the failed deliveries created in it, through
// a River job whose output counts them, and a second recovery queues
// nothing.
func TestSubscriptionRecover(t *testing.T) {
	t.Parallel()
	b := setupRecover(t)
	acct, other := b.createAccount(t), b.createAccount(t)
	var code atomic.Int32
	code.Store(500)
	rc := newHookReceiver(t, func(int) int { return int(code.Load()) })
	sub := createSub(t, b.testBundle, acct.Key, map[string]any{"url": rc.URL, "event_types": []string{"receiver_message_received"}})
	ctx := context.Background()

	// Three deliveries before the boundary, two after, none attempted yet.
	since := time.Now().Add(-time.Minute)
	var inRange, after []string
	for range 3 {
		inRange = append(inRange, b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID)).ID)
	}
	boundary := time.Now().Add(time.Millisecond).Truncate(time.Millisecond)
	require.Eventually(t, func() bool { return time.Now().After(boundary.Add(time.Millisecond)) }, time.Second, time.Millisecond)
	for range 2 {
		after = append(after, b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID)).ID)
	}
	// The same range twice while its job waits is one job; the range
	// holds none of these deliveries.
	path := subsPath + "/" + sub.ID + "/recover"
	early := map[string]any{"since": since.Add(-time.Hour).Format(time.RFC3339Nano), "until": since.Format(time.RFC3339Nano)}
	var first, second recoveryJSON
	resp := b.do(t, "POST", path, acct.Key, early)
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	resp.JSON(t, &first)
	resp = b.do(t, "POST", path, acct.Key, early)
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	resp.JSON(t, &second)
	require.False(t, first.AlreadyQueued)
	require.True(t, second.AlreadyQueued)
	require.Equal(t, first.JobID, second.JobID)
	job, err := b.worker.JobGet(ctx, first.JobID)
	require.NoError(t, err)
	require.Contains(t, job.Tags, "subscription-"+sub.ID, "River UI's tag filter finds it with the subscription's pushes")

	// One attempt each, so that the 500 ends them failed at once.
	_, err = b.db.Exec(ctx, `UPDATE river_job SET max_attempts = 1
		WHERE id IN (SELECT job_id FROM webhook_deliveries WHERE account_id = $1)`, acct.ID)
	require.NoError(t, err)
	b.start(t)
	for _, id := range append(append([]string(nil), inRange...), after...) {
		b.waitDelivery(t, acct.Key, id, is("failed", 1))
		b.jobSettled(t, id)
	}
	// The endpoint is healthy again; one failed delivery of the range is
	// retried by hand first: delivered, a recovery leaves it alone.
	code.Store(200)
	require.Equal(t, 202, b.do(t, "POST", "/api/accounts/me/deliveries/"+inRange[0]+"/retry", acct.Key, nil).Status)
	b.waitDelivery(t, acct.Key, inRange[0], is("delivered", 2))
	b.jobSettled(t, inRange[0])
	pushed := rc.count()

	require.Zero(t, b.recoverDone(t, first.JobID).Requeued)
	body := map[string]any{"since": since.Format(time.RFC3339Nano), "until": boundary.Format(time.RFC3339Nano)}
	resp = b.do(t, "POST", path, acct.Key, body)
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	var rec recoveryJSON
	resp.JSON(t, &rec)
	require.Equal(t, sub.ID, rec.SubscriptionID)
	require.True(t, rec.Until.Equal(boundary))
	require.False(t, rec.AlreadyQueued)
	out := b.recoverDone(t, rec.JobID)
	require.Equal(t, 2, out.Requeued, "the failed deliveries of the range, not the delivered one: %+v", out)
	require.False(t, out.Truncated)
	for _, id := range inRange[1:] {
		d := b.waitDelivery(t, acct.Key, id, is("delivered", 2))
		require.Equal(t, 2, d.MaxAttempts, "one extra attempt, as a manual retry of a failed delivery")
	}
	for _, id := range after {
		b.jobSettled(t, id)
		require.Equal(t, "failed", b.waitDelivery(t, acct.Key, id, is("failed", 1)).Status, "outside the range")
	}
	require.Equal(t, pushed+2, rc.count(), "each recovered delivery pushed once")
	d := b.waitDelivery(t, acct.Key, inRange[0], is("delivered", 2))
	require.Equal(t, 2, d.MaxAttempts)

	// The audit trail names the job.
	var payload deliveries.RecoveryRequestedPayload
	require.NoError(t, b.db.QueryRow(ctx, "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY id DESC LIMIT 1",
		acct.ID, events.TypeSubscriptionRecoveryRequested).Scan(&payload))
	require.Equal(t, rec.JobID, payload.JobID)
	require.False(t, payload.AlreadyQueued)
	var audits int
	require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2",
		acct.ID, events.TypeSubscriptionRecoveryRequested).Scan(&audits))
	require.Equal(t, 3, audits, "one per request, the one answered by a queued job too")
	require.Equal(t, sub.ID, payload.SubscriptionID.String())
	require.NotEmpty(t, payload.KeyIdentifier)

	// Again, until now: the range's delivered ones stay delivered, the two
	// after it are recovered now.
	resp = b.do(t, "POST", path, acct.Key, map[string]any{"since": since.Format(time.RFC3339Nano)})
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	resp.JSON(t, &rec)
	require.WithinDuration(t, time.Now(), rec.Until, 5*time.Second, "until defaults to now")
	require.Equal(t, 2, b.recoverDone(t, rec.JobID).Requeued)
	for _, id := range after {
		b.waitDelivery(t, acct.Key, id, is("delivered", 2))
		b.jobSettled(t, id)
	}
	resp = b.do(t, "POST", path, acct.Key, map[string]any{"since": since.Format(time.RFC3339Nano)})
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	resp.JSON(t, &rec)
	require.Zero(t, b.recoverDone(t, rec.JobID).Requeued, "nothing failed is left: nothing is queued twice")
	require.Equal(t, pushed+4, rc.count())

	t.Run("OtherAccount", func(t *testing.T) {
		resp := b.do(t, "POST", path, other.Key, map[string]any{"since": since.Format(time.RFC3339Nano)})
		require.Equal(t, 404, resp.Status, "%s", resp.Body)
	})
	t.Run("BadRanges", func(t *testing.T) {
		now := time.Now()
		for _, c := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"since": now.Add(-15 * 24 * time.Hour).Format(time.RFC3339)}, "since"},
			{map[string]any{"since": now.Add(time.Hour).Format(time.RFC3339)}, "since"},
			{map[string]any{"since": now.Add(-time.Hour).Format(time.RFC3339), "until": now.Add(-2 * time.Hour).Format(time.RFC3339)}, "until"},
			{map[string]any{"until": now.Format(time.RFC3339)}, "since"},
		} {
			resp := b.do(t, "POST", path, acct.Key, c.body)
			require.Equal(t, 422, resp.Status, "%v: %s", c.body, resp.Body)
			require.Contains(t, resp.Detail(t), c.field, "%v", c.body)
		}
		resp := b.do(t, "POST", path, acct.Key, map[string]any{"since": "yesterday"})
		require.Equal(t, 400, resp.Status, "not RFC 3339: malformed, as every time in a body")
	})
	t.Run("Disabled", func(t *testing.T) {
		require.Equal(t, 200, b.do(t, "PATCH", subsPath+"/"+sub.ID, acct.Key, map[string]any{"enabled": false}).Status)
		resp := b.do(t, "POST", path, acct.Key, map[string]any{"since": since.Format(time.RFC3339Nano)})
		require.Equal(t, 409, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "enable")
	})
}

// TestRecoverWhileStillFailing: recovering a range while the endpoint is
// still down pushes each failed delivery once more, and a delivery that
// fails again raises no second webhook_delivery_failed: it reported its
// failure when it first ended failed.
func TestRecoverWhileStillFailing(t *testing.T) {
	t.Parallel()
	b := setupRecover(t)
	acct := b.createAccount(t)
	rc := newHookReceiver(t, func(int) int { return 500 })
	sub := createSub(t, b.testBundle, acct.Key, map[string]any{"url": rc.URL, "event_types": []string{"receiver_message_received"}})
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	ids := []string{b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID)).ID, b.deliveryOf(t, acct.Key, b.emitMessage(t, acct.ID)).ID}
	_, err := b.db.Exec(ctx, `UPDATE river_job SET max_attempts = 1
		WHERE id IN (SELECT job_id FROM webhook_deliveries WHERE account_id = $1)`, acct.ID)
	require.NoError(t, err)
	b.start(t)
	failedEvents := func() int {
		var n int
		require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2",
			acct.ID, events.TypeWebhookDeliveryFailed).Scan(&n))
		return n
	}
	for _, id := range ids {
		b.waitDelivery(t, acct.Key, id, is("failed", 1))
		b.jobSettled(t, id)
	}
	require.Equal(t, 2, failedEvents(), "each delivery reports its failure once")

	resp := b.do(t, "POST", subsPath+"/"+sub.ID+"/recover", acct.Key, map[string]any{"since": since.Format(time.RFC3339Nano)})
	require.Equal(t, 202, resp.Status, "%s", resp.Body)
	var rec recoveryJSON
	resp.JSON(t, &rec)
	require.Equal(t, 2, b.recoverDone(t, rec.JobID).Requeued)
	for _, id := range ids {
		b.waitDelivery(t, acct.Key, id, is("failed", 2))
		b.jobSettled(t, id)
	}
	require.Equal(t, 4, rc.count(), "each delivery pushed once more")
	require.Equal(t, 2, failedEvents(), "failing again after a recovery raises nothing more")
}
