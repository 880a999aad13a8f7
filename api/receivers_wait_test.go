package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

type waitResult struct {
	resp    response
	elapsed time.Duration
}

// waitAsync starts a wait and returns a channel with its response.
func (b *testBundle) waitAsync(t *testing.T, key, path string) <-chan waitResult {
	t.Helper()
	out := make(chan waitResult, 1)
	go func() {
		start := time.Now()
		resp := b.do(t, "GET", path, key, nil)
		out <- waitResult{resp, time.Since(start)}
	}()
	return out
}

// eventually waits (bounded) for cond: the event it waits for must happen.
func rcvEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func deliverText(t *testing.T, store *receivers.Store, address, subject string) string {
	t.Helper()
	d, err := store.DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: " + subject + "\r\n\r\nbody\r\n"), Recipients: []string{address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	return d[0].MessageID.String()
}

func TestReceiverWait(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	b, hub := committedBundle(t, pool, url)
	store := testStore(t, pool)
	acct := b.createAccount(t)

	t.Run("MessageBeforeWaitAnswersAtOnce", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		id := deliverText(t, store, r.Address, "early")
		start := time.Now()
		resp := b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=30"), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		// Not a speed limit: the behaviour under test is "at once" rather than
		// "at the end of the 30 s wait", so anything far below 30 s passes.
		require.Less(t, time.Since(start), 15*time.Second)
		var m messageJSON
		resp.JSON(t, &m)
		require.Equal(t, id, m.ID)
		require.Equal(t, "early", m.Subject)
	})

	t.Run("MessageDuringWaitOverSMTP", func(t *testing.T) {
		t.Parallel()
		addr := startSMTP(t, store, 0)
		r := b.createReceiver(t, acct.Key, nil)
		before := hub.Len()
		res := b.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
		rcvEventually(t, "the waiter to register", func() bool { return hub.Len() > before })
		require.NoError(t, sendMail(addr, "s@example.org", []string{r.Address}, "Subject: during\n\nhi\n"))
		got := <-res
		require.Equal(t, http.StatusOK, got.resp.Status, "%s", got.resp.Body)
		var m messageJSON
		got.resp.JSON(t, &m)
		require.Equal(t, "during", m.Subject)
	})

	t.Run("NoneArrives204AfterTimeout", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		start := time.Now()
		resp := b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1"), acct.Key, nil)
		require.Equal(t, http.StatusNoContent, resp.Status)
		require.Empty(t, resp.Body)
		require.GreaterOrEqual(t, time.Since(start), time.Second)
	})

	t.Run("AfterCursor", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		first := deliverText(t, store, r.Address, "one")
		second := deliverText(t, store, r.Address, "two")
		var m messageJSON
		resp := b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1"), acct.Key, nil)
		resp.JSON(t, &m)
		require.Equal(t, first, m.ID, "without after: the oldest message")
		resp = b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1&after="+first), acct.Key, nil)
		resp.JSON(t, &m)
		require.Equal(t, second, m.ID)
		resp = b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1&after="+second), acct.Key, nil)
		require.Equal(t, http.StatusNoContent, resp.Status)

		res := b.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30&after="+second))
		time.Sleep(50 * time.Millisecond)
		third := deliverText(t, store, r.Address, "three")
		got := <-res
		require.Equal(t, http.StatusOK, got.resp.Status)
		got.resp.JSON(t, &m)
		require.Equal(t, third, m.ID)

		other := b.createReceiver(t, acct.Key, nil)
		resp = b.do(t, "GET", receiverPath(other.ID, "/wait?timeout=1&after="+first), acct.Key, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "after must be a message of this receiver")
		resp.Detail(t)
	})

	t.Run("TimeoutBounds", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		for _, q := range []string{"timeout=0", "timeout=61", "timeout=-1"} {
			resp := b.do(t, "GET", receiverPath(r.ID, "/wait?"+q), acct.Key, nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, q)
			require.Contains(t, resp.Detail(t), "timeout")
		}
		for _, q := range []string{"timeout=abc", "timeout=1.5", "after=nope"} {
			resp := b.do(t, "GET", receiverPath(r.ID, "/wait?"+q), acct.Key, nil)
			require.Equal(t, http.StatusBadRequest, resp.Status, q)
		}
	})

	t.Run("Expired410AlsoMidWait", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		_, err := pool.Exec(context.Background(), "UPDATE receivers SET expires_at = now() + interval '1 second' WHERE id = $1", r.ID)
		require.NoError(t, err)
		resp := b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=20"), acct.Key, nil)
		require.Equal(t, http.StatusGone, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "expired")
		resp = b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1"), acct.Key, nil)
		require.Equal(t, http.StatusGone, resp.Status)
	})

	t.Run("Deleted404AlsoMidWait", func(t *testing.T) {
		t.Parallel()
		r := b.createReceiver(t, acct.Key, nil)
		before := hub.Len()
		res := b.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
		rcvEventually(t, "the waiter to register", func() bool { return hub.Len() > before })
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", receiverPath(r.ID), acct.Key, nil).Status)
		got := <-res
		require.Equal(t, http.StatusNotFound, got.resp.Status, "%s", got.resp.Body)
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1"), acct.Key, nil).Status)
	})

	t.Run("ShutdownEndsWaitsWith503", func(t *testing.T) {
		t.Parallel()
		b2, hub2 := committedBundle(t, pool, url)
		r := b2.createReceiver(t, acct.Key, nil)
		res := b2.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
		rcvEventually(t, "the waiter to register", func() bool { return hub2.Len() == 1 })
		hub2.Close()
		got := <-res
		require.Equal(t, http.StatusServiceUnavailable, got.resp.Status)
		require.Equal(t, "1", got.resp.Header.Get("Retry-After"))
	})
}

// TestReceiverWaitTwoServers: two API servers, each with its own LISTEN hub,
// on one database are both woken by one arrival.
func TestReceiverWaitTwoServers(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	b1, hub1 := committedBundle(t, pool, url)
	b2, hub2 := committedBundle(t, pool, url)
	acct := b1.createAccount(t)
	r := b1.createReceiver(t, acct.Key, nil)
	addr := startSMTP(t, testStore(t, pool), 0)

	w1 := b1.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
	w2 := b2.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
	rcvEventually(t, "both waiters to register", func() bool { return hub1.Len() == 1 && hub2.Len() == 1 })
	require.NoError(t, sendMail(addr, "s@example.org", []string{r.Address}, "Subject: fan-out\n\nhi\n"))
	for _, w := range []<-chan waitResult{w1, w2} {
		got := <-w
		require.Equal(t, http.StatusOK, got.resp.Status, "%s", got.resp.Body)
		var m messageJSON
		got.resp.JSON(t, &m)
		require.Equal(t, "fan-out", m.Subject)
	}
}

// TestReceiverHubReconnects: when the LISTEN connection dies the hub
// reconnects and wakes every waiter to re-check, so a message that arrived
// while nobody listened is not missed.
func TestReceiverHubReconnects(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	b, hub := committedBundle(t, pool, url)
	acct := b.createAccount(t)
	r := b.createReceiver(t, acct.Key, nil)
	res := b.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30"))
	rcvEventually(t, "the waiter to register", func() bool { return hub.Len() == 1 })
	_, err := pool.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()")
	require.NoError(t, err)
	store := testStore(t, pool)
	first := deliverText(t, store, r.Address, "while reconnecting")
	got := <-res
	require.Equal(t, http.StatusOK, got.resp.Status, "%s", got.resp.Body)

	// Later arrivals are notified through the new connection.
	res = b.waitAsync(t, acct.Key, receiverPath(r.ID, "/wait?timeout=30&after="+first))
	rcvEventually(t, "the waiter to register", func() bool { return hub.Len() == 1 })
	time.Sleep(100 * time.Millisecond)
	second := deliverText(t, store, r.Address, "after reconnecting")
	got = <-res
	require.Equal(t, http.StatusOK, got.resp.Status, "%s", got.resp.Body)
	var m messageJSON
	got.resp.JSON(t, &m)
	require.Equal(t, second, m.ID)
}
