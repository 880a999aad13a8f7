package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/notify"
)

// send is do without assertions, for goroutines: the caller checks the
// answers (and their conformance) on the test's goroutine.
func (b *testBundle) send(method, path, key string, body any) (response, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return response{}, err
		}
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := b.srv.App().Test(req, -1)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: got}, err
}

// parallel sends n requests at once and returns the answers.
func (b *testBundle) parallel(t *testing.T, n int, req func(i int) (response, error)) []response {
	t.Helper()
	out := make([]response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = req(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return out
}

// countVerifyJobs counts every queued verification mail.
func countVerifyJobs(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
},
) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`, notify.VerifyEmailKind).Scan(&n))
	return n
}

// retryAfter reads a refusal's Retry-After, in seconds.
func retryAfter(t *testing.T, resp response) int {
	t.Helper()
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "a 429 says when to retry: %v", resp.Header)
	return secs
}

// TestVerificationResendsInParallel: many resends of one address at once
// queue one verification mail; the others are 429 with Retry-After.
func TestVerificationResendsInParallel(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	clock := &testClock{now: time.Now().UTC()}
	b := setup(t, func(o *setupOpts) { o.db = pool; o.now = clock.Now })
	a := b.createAccount(t)
	const base = "/api/accounts/me/notification-addresses"
	resp := b.do(t, "POST", base, a.Key, map[string]string{"email": "resend-" + a.Email})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var addr addressJSON
	resp.JSON(t, &addr)
	require.Equal(t, 1, b.verifyJobs(t, addr.ID))

	clock.Add(notify.RecipientCooldown)
	answers := b.parallel(t, 20, func(int) (response, error) {
		return b.send("POST", base+"/"+addr.ID+"/resend", a.Key, nil)
	})
	byStatus := map[int]int{}
	for _, r := range answers {
		byStatus[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			require.Contains(t, r.Detail(t), "verification mail")
			require.Equal(t, int(notify.RecipientCooldown/time.Second), retryAfter(t, r))
			checkConformance(t, b.srv, "POST", base+"/"+addr.ID+"/resend", a.Key, nil, r)
		}
	}
	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusTooManyRequests: 19}, byStatus)
	require.Equal(t, 2, b.verifyJobs(t, addr.ID), "the add's mail and one resend")
}

// TestVerificationCooldownPerRecipient: the cooldown and the daily bound
// belong to the recipient address, so neither deleting and adding it again
// nor adding it from another account mails it sooner or more often.
func TestVerificationCooldownPerRecipient(t *testing.T) {
	t.Parallel()
	// Mid-morning UTC, so the steps below stay on one UTC day.
	now := time.Now().UTC()
	clock := &testClock{now: time.Date(now.Year(), now.Month(), now.Day(), 6, 0, 0, 0, time.UTC)}
	b := setup(t, func(o *setupOpts) { o.now = clock.Now })
	a, other := b.createAccount(t), b.createAccount(t)
	const base = "/api/accounts/me/notification-addresses"
	stranger := "stranger-" + a.Email
	before := countVerifyJobs(t, b.db)

	add := func(key string) (response, addressJSON) {
		t.Helper()
		resp := b.do(t, "POST", base, key, map[string]string{"email": stranger})
		var out addressJSON
		if resp.Status == http.StatusCreated {
			resp.JSON(t, &out)
		}
		return resp, out
	}
	remove := func(key, id string) {
		t.Helper()
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", base+"/"+id, key, nil).Status)
	}

	resp, first := add(a.Key)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	remove(a.Key, first.ID)
	for range 5 {
		resp, _ = add(a.Key)
		require.Equal(t, http.StatusTooManyRequests, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "less than a minute ago")
		require.Equal(t, 60, retryAfter(t, resp))
	}
	require.Len(t, b.addresses(t, a.Key), 1, "only the sign-in address: the refused add stored nothing")

	resp, _ = add(other.Key)
	require.Equal(t, http.StatusTooManyRequests, resp.Status, "another account does not start a fresh cooldown: %s", resp.Body)
	require.Equal(t, 1, countVerifyJobs(t, b.db)-before, "one mail to the stranger")

	clock.Add(30 * time.Second)
	resp, _ = add(other.Key)
	require.Equal(t, http.StatusTooManyRequests, resp.Status)
	require.Equal(t, 30, retryAfter(t, resp), "the wait left, not the whole cooldown")

	// Past the cooldown it may be mailed again, up to the daily bound,
	// whichever account adds it.
	sent := 1
	keys := []string{other.Key, a.Key}
	for i := 0; ; i++ {
		clock.Add(notify.RecipientCooldown)
		resp, added := add(keys[i%2])
		if resp.Status != http.StatusCreated {
			require.Equal(t, http.StatusTooManyRequests, resp.Status, "%s", resp.Body)
			require.Contains(t, resp.Detail(t), "today")
			day := clock.Now().Truncate(24 * time.Hour).Add(24 * time.Hour)
			require.Equal(t, int(day.Sub(clock.Now())/time.Second), retryAfter(t, resp), "until the next UTC day")
			break
		}
		sent++
		remove(keys[i%2], added.ID)
		require.LessOrEqual(t, sent, notify.RecipientMailsPerDay)
	}
	require.Equal(t, notify.RecipientMailsPerDay, sent)
	require.Equal(t, notify.RecipientMailsPerDay, countVerifyJobs(t, b.db)-before)

	// The next UTC day has a fresh budget.
	clock.Add(24 * time.Hour)
	resp, _ = add(a.Key)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
}

// TestNotificationAddressCapInParallel: concurrent adds never take an
// account past MaxAddresses. The adds are held at their insert until all
// of them are under way, so each has counted before any has inserted.
func TestNotificationAddressCapInParallel(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	a := b.createAccount(t)
	require.Len(t, b.addresses(t, a.Key), 1)
	ctx := context.Background()
	var err error

	const n = 15
	// Open the connections the adds will use before the gate closes.
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		conns[i], err = pool.Acquire(ctx)
		require.NoError(t, err)
	}
	for _, c := range conns {
		c.Release()
	}
	// The gate locks the account row FOR UPDATE: reads go through, and
	// whatever writes an address (its foreign key) or locks the account
	// waits.
	gate, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { gate.Close(context.Background()) })
	hold, err := gate.Begin(ctx)
	require.NoError(t, err)
	_, err = hold.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, a.ID)
	require.NoError(t, err)

	const base = "/api/accounts/me/notification-addresses"
	done := make(chan []response)
	go func() {
		done <- b.parallel(t, n, func(i int) (response, error) {
			return b.send("POST", base, a.Key, map[string]string{"email": fmt.Sprintf("cap%d-%s", i, a.Email)})
		})
	}()
	// Every add waits on a lock: the gate, or another add's.
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, gate.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		return waiting == n
	}, time.Minute, 10*time.Millisecond)
	require.NoError(t, hold.Rollback(ctx))

	byStatus := map[int]int{}
	for _, r := range <-done {
		byStatus[r.Status]++
		if r.Status == http.StatusConflict {
			require.Contains(t, r.Detail(t), "at most")
		}
	}
	require.Equal(t, map[int]int{http.StatusCreated: notify.MaxAddresses - 1, http.StatusConflict: n - notify.MaxAddresses + 1}, byStatus)
	require.Len(t, b.addresses(t, a.Key), notify.MaxAddresses)
}
