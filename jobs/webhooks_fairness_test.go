package jobs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// tarpit is a loopback endpoint that holds every request until released,
// or until the client gives up on it, and keeps count of both.
type tarpit struct {
	*httptest.Server
	release chan struct{}
	open    func()        // closes release, once
	changed chan struct{} // a value whenever the counts change

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	answered    int
	abandoned   int // requests the client gave up on before the release
}

type tarpitCounts struct{ inFlight, maxInFlight, answered, abandoned int }

func newTarpit(t *testing.T) *tarpit {
	tp := &tarpit{release: make(chan struct{}), changed: make(chan struct{}, 1)}
	tp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.update(func() {
			tp.inFlight++
			tp.maxInFlight = max(tp.maxInFlight, tp.inFlight)
		})
		select {
		case <-tp.release:
			w.WriteHeader(http.StatusOK)
			tp.update(func() { tp.inFlight--; tp.answered++ })
		case <-r.Context().Done():
			tp.update(func() { tp.inFlight--; tp.abandoned++ })
		}
	}))
	tp.open = sync.OnceFunc(func() { close(tp.release) })
	t.Cleanup(func() {
		tp.open()
		tp.Close()
	})
	return tp
}

func (tp *tarpit) update(f func()) {
	tp.mu.Lock()
	f()
	tp.mu.Unlock()
	select {
	case tp.changed <- struct{}{}:
	default:
	}
}

func (tp *tarpit) counts() tarpitCounts {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tarpitCounts{tp.inFlight, tp.maxInFlight, tp.answered, tp.abandoned}
}

// waitUntil waits (bounded) until cond holds for the counts.
func (tp *tarpit) waitUntil(t *testing.T, what string, cond func(tarpitCounts) bool) {
	t.Helper()
	bound := time.After(2 * time.Minute)
	for !cond(tp.counts()) {
		select {
		case <-tp.changed:
		case <-bound:
			t.Fatalf("the tarpit never had %s; last: %+v", what, tp.counts())
		}
	}
}

// fairEnv is a River client working the webhooks queue with a small pool
// and small fairness bounds, and a second account beside whEnv's.
func newFairEnv(t *testing.T, total int, limits webhook.Limits) *whEnv {
	t.Helper()
	return newWHEnvWith(t, func(d *Deps) {
		// Long enough that, without fairness, the held pushes are still
		// held when the other tenant's push is due; a test that fails
		// sees them end (abandoned) first.
		d.WebhookClient = webhook.NewClient(loopbackGuard(t), webhook.ClientOptions{Timeout: 20 * time.Second})
		d.Settings.WebhookLimits = limits
	}, Options{Concurrency: total, WebhookConcurrency: total, Queues: []string{queues.Webhooks}})
}

func (e *whEnv) newAccount(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := e.pool.Exec(context.Background(), "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", id, id.String()+"@example.com")
	require.NoError(t, err)
	return id
}

func (e *whEnv) subscribeAs(t *testing.T, account uuid.UUID, url string) uuid.UUID {
	t.Helper()
	return e.subscribe(t, url, webhook.GenerateSecret(), func(p *dbsqlc.SubscriptionInsertParams) { p.AccountID = account })
}

// signalReceiver is an endpoint that answers 200 at once and announces
// each request.
func signalReceiver(t *testing.T) (*receiver, chan struct{}) {
	got := make(chan struct{}, 16)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		select {
		case got <- struct{}{}:
		default:
		}
	})
	return rc, got
}

// awaitWhileHeld waits until got announces a push, and fails if any push
// of the slow accounts ended first: the other tenant's push must arrive
// while every held push is still held, not once the pool frees up. A
// worker records an attempt's end before it takes another job, so the
// attempt rows say whether a held push ended first, whatever the tarpit
// has noticed yet of a client that gave up.
func (e *whEnv) awaitWhileHeld(t *testing.T, tp *tarpit, got <-chan struct{}, slow ...uuid.UUID) tarpitCounts {
	t.Helper()
	bound := time.After(2 * time.Minute)
	for {
		select {
		case <-got:
			var ended int
			require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_delivery_attempts a
				JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.account_id = ANY($1) AND a.finished_at IS NOT NULL`, slow).Scan(&ended))
			require.Zero(t, ended, "the other tenant's push waited until a held push ended")
			c := tp.counts()
			require.Zero(t, c.abandoned+c.answered, "a held push ended before the other tenant's push arrived")
			return c
		case <-tp.changed:
			if c := tp.counts(); c.abandoned+c.answered > 0 {
				t.Fatalf("the other tenant's push waited behind the held ones: a held push ended first (%+v)", c)
			}
		case <-bound:
			t.Fatalf("the other tenant's push never arrived; tarpit: %+v", tp.counts())
		}
	}
}

// checkDelivered checks that every delivery of the event ends delivered
// with one attempt (a push that waited for its turn used none), and returns
// how many of them waited.
func (e *whEnv) checkDelivered(t *testing.T, account, eventID uuid.UUID) (waited int) {
	t.Helper()
	rows, err := dbsqlc.New().DeliveryList(context.Background(), e.pool, dbsqlc.DeliveryListParams{AccountID: account, EventID: &eventID, Max: 100})
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	for _, d := range rows {
		var got dbsqlc.WebhookDelivery
		require.Eventually(t, func() bool {
			got, err = dbsqlc.New().DeliveryGetByID(context.Background(), e.pool, dbsqlc.DeliveryGetByIDParams{ID: d.ID, AccountID: account})
			require.NoError(t, err)
			return got.Status == deliveries.StatusDelivered
		}, time.Minute, 10*time.Millisecond, "delivery %s never delivered; last: %+v", d.ID, got)
		require.EqualValues(t, 1, got.Attempts, "waiting for a turn uses no attempt")
		require.Len(t, e.attempts(t, d.ID), 1, "waiting for a turn leaves no attempt row")
		job := e.settled(t, got)
		require.Equal(t, 1, job.Attempt)
		if deliveries.FairWaits(job.Metadata) > 0 {
			waited++
		}
	}
	return waited
}

// One account's slow endpoints take at most WEBHOOK_ACCOUNT_CONCURRENCY
// workers: another account's push goes out while all of them are held.
func TestDeliveryFairnessPerAccount(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, 3, webhook.Limits{PerAccount: 2, PerHost: 10})
	tp := newTarpit(t)
	for range 4 {
		e.subscribeAs(t, e.account, tp.URL)
	}
	victim := e.newAccount(t)
	rc, got := signalReceiver(t)
	e.subscribeAs(t, victim, rc.URL)

	slow := e.emit(t, messageEvent(e.account)) // four pushes into the tarpit
	tp.waitUntil(t, "two pushes held", func(c tarpitCounts) bool { return c.inFlight >= 2 })
	e.emit(t, messageEvent(victim))

	c := e.awaitWhileHeld(t, tp, got, e.account)
	require.Equal(t, 2, c.maxInFlight, "the slow account never has more than its bound in flight")
	require.Len(t, rc.requests(), 1)

	tp.open()
	waited := e.checkDelivered(t, e.account, slow.ID)
	require.Positive(t, waited, "the pushes over the bound waited for their turn")
	require.Equal(t, 2, tp.counts().maxInFlight)
}

// Several accounts pointing at one slow host take at most
// WEBHOOK_HOST_CONCURRENCY workers between them, whatever their own bounds
// leave.
func TestDeliveryFairnessPerHost(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, 4, webhook.Limits{PerAccount: 2, PerHost: 3})
	tp := newTarpit(t)
	second := e.newAccount(t)
	for range 3 {
		e.subscribeAs(t, e.account, tp.URL)
		e.subscribeAs(t, second, tp.URL)
	}
	victim := e.newAccount(t)
	rc, got := signalReceiver(t)
	// The same machine under another name is another host.
	e.subscribeAs(t, victim, strings.Replace(rc.URL, "127.0.0.1", "localhost", 1))

	first := e.emit(t, messageEvent(e.account))
	tp.waitUntil(t, "two pushes held", func(c tarpitCounts) bool { return c.inFlight >= 2 })
	other := e.emit(t, messageEvent(second))
	tp.waitUntil(t, "three pushes held", func(c tarpitCounts) bool { return c.inFlight >= 3 })
	e.emit(t, messageEvent(victim))

	c := e.awaitWhileHeld(t, tp, got, e.account, second)
	require.Equal(t, 3, c.maxInFlight, "the slow host never has more than its bound in flight")

	tp.open()
	waited := e.checkDelivered(t, e.account, first.ID) + e.checkDelivered(t, second, other.ID)
	require.Positive(t, waited, "the pushes over the bound waited for their turn")
	require.Equal(t, 3, tp.counts().maxInFlight)
}
