package signin_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/signin"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fail charges n wrong passwords at now and requires each to be admitted.
func fail(t *testing.T, db dbutil.Executor, account uuid.UUID, device string, now time.Time, n int) {
	t.Helper()
	for i := range n {
		_, err := signin.Begin(context.Background(), db, account, device, now)
		require.NoError(t, err, "failure %d", i+1)
	}
}

func limited(t *testing.T, err error) time.Duration {
	t.Helper()
	var le *signin.LimitedError
	require.ErrorAs(t, err, &le)
	return le.RetryAfter
}

func TestDelay(t *testing.T) {
	t.Parallel()
	require.Zero(t, signin.Delay(signin.FreeFailures-1))
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i, w := range want {
		require.Equal(t, w, signin.Delay(signin.FreeFailures+i), "failure %d", signin.FreeFailures+i)
	}
	require.Equal(t, signin.MaxDelay, signin.Delay(1<<30))
}

// TestGrowingDelays: ten free failures, then each failure closes the
// budget for twice as long as the last; a check while closed is refused
// without being counted; failures are forgotten a day after the last.
func TestGrowingDelays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	acct := testfactory.Account(t, tx)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	fail(t, tx, acct, "", now, signin.FreeFailures)
	_, err := signin.Begin(ctx, tx, acct, "", now.Add(59*time.Second))
	require.Equal(t, time.Second, limited(t, err))
	for i, d := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		now = now.Add(d)
		fail(t, tx, acct, "", now, 1)
		_, err = signin.Begin(ctx, tx, acct, "", now)
		require.Equal(t, 2*d, limited(t, err), "after failure %d", signin.FreeFailures+i+1)
	}
	// Refused checks did not count: the next delay is still 16 minutes.
	now = now.Add(8 * time.Minute)
	fail(t, tx, acct, "", now, 1)
	_, err = signin.Begin(ctx, tx, acct, "", now)
	require.Equal(t, 16*time.Minute, limited(t, err))

	// A day after the last failure the budget is full again.
	now = now.Add(signin.ForgetAfter)
	fail(t, tx, acct, "", now, signin.FreeFailures)
	_, err = signin.Begin(ctx, tx, acct, "", now)
	limited(t, err)
}

// TestRightPasswordClearsItsBudget: a success clears the budget it was
// charged to; an abandoned check (never compared) is taken back.
func TestRightPasswordClearsItsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	acct := testfactory.Account(t, tx)
	now := time.Now()

	fail(t, tx, acct, "", now, signin.FreeFailures-1)
	a, err := signin.Begin(ctx, tx, acct, "", now)
	require.NoError(t, err)
	require.NoError(t, a.Abandon(ctx, tx))
	a, err = signin.Begin(ctx, tx, acct, "", now)
	require.NoError(t, err, "the abandoned check was taken back")
	token, err := a.Succeeded(ctx, tx, now, false)
	require.NoError(t, err)
	require.Empty(t, token, "not remembered")
	fail(t, tx, acct, "", now, signin.FreeFailures)
	_, err = signin.Begin(ctx, tx, acct, "", now)
	limited(t, err)

	_, err = signin.Begin(ctx, tx, uuid.Must(uuid.NewV7()), "", now)
	require.ErrorIs(t, err, signin.ErrNoAccount)
}

// TestKnownDeviceHasItsOwnBudget: guesses from unknown clients close
// their budget, not the owner's device's; a device's own failures close
// only it (then it is one more unknown client); another account, a
// forged token or a device past DeviceTTL is unknown.
func TestKnownDeviceHasItsOwnBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	acct, other := testfactory.Account(t, tx), testfactory.Account(t, tx)
	now := time.Now()

	a, err := signin.Begin(ctx, tx, acct, "", now)
	require.NoError(t, err)
	require.False(t, a.Known())
	device, err := a.Succeeded(ctx, tx, now, true)
	require.NoError(t, err)
	require.True(t, signin.WellFormed(device))

	fail(t, tx, acct, "", now, signin.FreeFailures)
	_, err = signin.Begin(ctx, tx, acct, "", now)
	limited(t, err)
	_, err = signin.Begin(ctx, tx, acct, signin.NewToken(), now)
	limited(t, err)
	a, err = signin.Begin(ctx, tx, acct, device, now)
	require.NoError(t, err, "the owner's device passes")
	require.True(t, a.Known())
	again, err := a.Succeeded(ctx, tx, now, true)
	require.NoError(t, err)
	require.Equal(t, device, again, "a known device keeps its token")
	_, err = signin.Begin(ctx, tx, acct, "", now)
	limited(t, err)

	// The device is unknown to another account.
	a, err = signin.Begin(ctx, tx, other, device, now)
	require.NoError(t, err)
	require.False(t, a.Known())

	// The device's own failures close only the device.
	fail(t, tx, acct, device, now, signin.FreeFailures)
	_, err = signin.Begin(ctx, tx, acct, device, now)
	limited(t, err)

	// Trust lapses DeviceTTL after the last right password.
	later := now.Add(signin.DeviceTTL + time.Minute)
	fresh, err := signin.Begin(ctx, tx, other, "", later)
	require.NoError(t, err)
	otherDevice, err := fresh.Succeeded(ctx, tx, later, true)
	require.NoError(t, err)
	a, err = signin.Begin(ctx, tx, other, otherDevice, later.Add(signin.DeviceTTL-time.Second))
	require.NoError(t, err)
	require.True(t, a.Known())
	a, err = signin.Begin(ctx, tx, other, otherDevice, later.Add(signin.DeviceTTL+time.Second))
	require.NoError(t, err)
	require.False(t, a.Known(), "past DeviceTTL the device is unknown")
}

// TestKnownDevicesAreBounded: an account keeps at most MaxDevices known
// devices, the most recent.
func TestKnownDevicesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	acct := testfactory.Account(t, tx)
	now := time.Now()
	var tokens []string
	for i := range signin.MaxDevices + 5 {
		at := now.Add(time.Duration(i) * time.Second)
		a, err := signin.Begin(ctx, tx, acct, "", at)
		require.NoError(t, err)
		tok, err := a.Succeeded(ctx, tx, at, true)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM signin_limits WHERE account_id = $1 AND device_hash <> ''`, acct).Scan(&n))
	require.Equal(t, signin.MaxDevices, n)
	last := now.Add(time.Minute)
	a, err := signin.Begin(ctx, tx, acct, tokens[0], last)
	require.NoError(t, err)
	require.False(t, a.Known(), "the oldest device was forgotten")
	a, err = signin.Begin(ctx, tx, acct, tokens[len(tokens)-1], last)
	require.NoError(t, err)
	require.True(t, a.Known())

	require.NoError(t, signin.ForgetDevices(ctx, tx, acct))
	a, err = signin.Begin(ctx, tx, acct, tokens[len(tokens)-1], last)
	require.NoError(t, err)
	require.False(t, a.Known(), "a password change forgets the devices")
}

// TestConcurrentGuessesCannotOverrunTheBudget: checks are charged under
// the row's lock before the password is compared, so of many guesses in
// flight at once exactly FreeFailures are compared.
func TestConcurrentGuessesCannotOverrunTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	acct := testfactory.Account(t, pool)
	now := time.Now()
	const guesses = 40
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		admitted, refused int
	)
	start := make(chan struct{})
	for range guesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := signin.Begin(ctx, pool, acct, "", now)
			var le *signin.LimitedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &le):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, signin.FreeFailures, admitted)
	require.Equal(t, guesses-signin.FreeFailures, refused)
}
