package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// hookFixture is a database with one account subscribed to a loopback
// receiver, sealed with the key baseEnv gives subprocesses.
type hookFixture struct {
	pool    *pgxpool.Pool
	url     string
	client  *river.Client[pgx.Tx] // insert-only, for emitting
	account uuid.UUID
	secret  string
}

func newHookFixture(t *testing.T, receiverURL string) *hookFixture {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	ctx := context.Background()
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	f := &hookFixture{pool: pool, url: url, client: client, account: uuid.Must(uuid.NewV7()), secret: webhook.GenerateSecret()}
	_, err = pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'crash@example.com', 'x')", f.account)
	require.NoError(t, err)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{1}, 32)) // baseEnv's MAILWATCH_SECRET_KEY
	require.NoError(t, err)
	p := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: f.account, URL: receiverURL}
	p.SecretCiphertext, p.SecretKeyID, err = keyring.Seal([]byte(f.secret), p.ID[:])
	require.NoError(t, err)
	_, err = dbsqlc.New().SubscriptionInsert(ctx, pool, p)
	require.NoError(t, err)
	return f
}

// emit emits n events, 100 per transaction.
func (f *hookFixture) emit(t *testing.T, n int) {
	t.Helper()
	for done := 0; done < n; {
		batch := min(100, n-done)
		require.NoError(t, dbutil.WithTx(context.Background(), f.pool, func(ctx context.Context, tx pgx.Tx) error {
			for range batch {
				if _, err := (&events.Emitter{River: f.client}).Emit(ctx, tx, events.Event{
					AccountID: f.account, Type: events.TypeReceiverMessageReceived,
					Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"},
				}); err != nil {
					return err
				}
			}
			return nil
		}))
		done += batch
	}
}

func (f *hookFixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// workerEnv is a worker's environment, with River's default rescue delay: a
// test that counts pushes would see a second one whenever a loaded machine
// slowed a push past a short delay and the rescuer ran it again.
func (f *hookFixture) workerEnv(t *testing.T) []string {
	return append(baseEnv(f.url),
		"METRICS_ADDR="+freeAddr(t),
		"WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32,::1/128",
		"LOG_LEVEL=warn",
	)
}

// TestWorkerCrashLosesNoDelivery is the acceptance test for "never lost":
// 2,000 deliveries in flight, the worker process killed with SIGKILL
// mid-way, a new one started. Every delivery arrives at least once with its
// stable webhook-id and the same signed bytes, and every row ends
// delivered.
func TestWorkerCrashLosesNoDelivery(t *testing.T) {
	t.Parallel()
	const total = 2000
	var (
		mu     sync.Mutex
		got    = map[string][][]byte{} // webhook-id -> bodies received
		hdrs   []http.Header
		bodies [][]byte
	)
	// Slow enough that the webhooks queue's 200 workers are all busy.
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		id := r.Header.Get("webhook-id")
		got[id] = append(got[id], body)
		hdrs = append(hdrs, r.Header.Clone())
		bodies = append(bodies, body)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}

	f := newHookFixture(t, rc.URL)
	f.emit(t, total)
	require.Equal(t, total, f.count(t, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"))

	// The killed worker's jobs are rescued 3 s after they started, not 90.
	// One account and one host here: their bounds are lifted to the pool's
	// size, so that all 200 workers push at the kill.
	env := append(f.workerEnv(t), "JOB_RESCUE_AFTER=3s", "WEBHOOK_ACCOUNT_CONCURRENCY=200", "WEBHOOK_HOST_CONCURRENCY=200")
	first := startProcess(t, env, "worker", "--queues=webhooks")
	require.Eventually(t, func() bool { return received() >= total/4 }, 30*time.Second, 5*time.Millisecond, "the first worker never got going:\n%s", first.log())
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	err := <-first.done
	first.done <- err // leave it for startProcess's cleanup
	inFlight := f.count(t, "SELECT count(*) FROM river_job WHERE state = 'running'")
	receivedAtKill := received()
	t.Logf("killed the worker after %d deliveries arrived; %d jobs were running", receivedAtKill, inFlight)
	require.Positive(t, inFlight, "the kill must catch pushes in flight")
	require.Less(t, receivedAtKill, total, "the kill must come before the end")

	second := startProcess(t, env, "worker", "--queues=webhooks")
	require.Eventually(t, func() bool {
		return f.count(t, "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'") == total
	}, 50*time.Second, 100*time.Millisecond, "not every delivery ended delivered:\n%s", second.log())

	rows, err := f.pool.Query(context.Background(), "SELECT id, body FROM webhook_deliveries")
	require.NoError(t, err)
	type row struct {
		id   uuid.UUID
		body []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.body)
	})
	require.NoError(t, err)
	require.Len(t, all, total)
	mu.Lock()
	defer mu.Unlock()
	duplicates := 0
	for _, d := range all {
		bs := got[d.id.String()]
		require.NotEmpty(t, bs, "delivery %s never arrived", d.id)
		for _, b := range bs {
			require.Equal(t, d.body, b, "every attempt sends the stored bytes")
		}
		duplicates += len(bs) - 1
	}
	require.Len(t, got, total, "no request carried an unknown webhook-id")
	wh, err := standardwebhooks.NewWebhook(f.secret)
	require.NoError(t, err)
	for i := range hdrs {
		require.NoError(t, wh.Verify(bodies[i], hdrs[i]))
	}
	// Delivery is at least once, and the duplicates are bounded: only a
	// push in flight when the worker died (its outcome never recorded) is
	// sent again after the rescue, once. docs/features/webhooks.md quotes this figure.
	rescued := f.count(t, "SELECT count(*) FROM webhook_delivery_attempts WHERE error_class = 'interrupted'")
	t.Logf("duplicates after a worker kill: %d of %d deliveries arrived twice; %d jobs were running at the kill, "+
		"%d attempts were interrupted (at least once, de-duplicated on webhook-id)", duplicates, total, inFlight, rescued)
	require.LessOrEqual(t, duplicates, rescued, "only a push in flight at the kill (its attempt interrupted) may be sent twice")
	require.LessOrEqual(t, rescued, 200, "pushes in flight are bounded by WEBHOOK_CONCURRENCY (200)")
	for id, bs := range got {
		require.LessOrEqual(t, len(bs), 2, "delivery %s arrived more than twice", id)
	}
	require.Zero(t, f.count(t, "SELECT count(*) FROM webhook_delivery_attempts WHERE finished_at IS NULL"))
}
