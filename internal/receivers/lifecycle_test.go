package receivers_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

func newEmitter(t *testing.T) *events.Emitter {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	return &events.Emitter{River: client}
}

// TestCreateTTLBounds: a lifetime outside 60 s to 7 days is refused
// before anything is stored; the bounds themselves and the default are
// accepted.
func TestCreateTTLBounds(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	account := testfactory.Account(t, tx)
	now := testNow()
	for _, ttl := range []int{receivers.MinTTL - 1, receivers.MaxTTL + 1, -5} {
		_, err := receivers.Create(t.Context(), tx, account, receivers.NewReceiver{TTLSeconds: ttl, InboundDomain: "in.example"}, now)
		require.ErrorIs(t, err, receivers.ErrTTL, "ttl %d", ttl)
	}
	for ttl, want := range map[int]int{0: receivers.DefaultTTL, receivers.MinTTL: receivers.MinTTL, receivers.MaxTTL: receivers.MaxTTL} {
		r, err := receivers.Create(t.Context(), tx, account, receivers.NewReceiver{TTLSeconds: ttl, InboundDomain: "In.Example"}, now)
		require.NoError(t, err, "ttl %d", ttl)
		require.EqualValues(t, want, r.TtlSeconds)
		require.True(t, r.ExpiresAt.Equal(now.Add(time.Duration(want)*time.Second)))
		require.Regexp(t, `^[a-z2-7]{20}@in\.example$`, r.Address)
	}
	rows, err := receivers.List(t.Context(), tx, account, nil, 50)
	require.NoError(t, err)
	require.Len(t, rows, 3)
}

// TestCreateRefusals: email receivers need an inbound domain; a channel is
// email or sms.
func TestCreateRefusals(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	account := testfactory.Account(t, tx)
	_, err := receivers.Create(t.Context(), tx, account, receivers.NewReceiver{}, testNow())
	require.ErrorIs(t, err, receivers.ErrEmailUnconfigured)
	_, err = receivers.Create(t.Context(), tx, account, receivers.NewReceiver{Channel: "fax", InboundDomain: "in.example"}, testNow())
	require.ErrorIs(t, err, receivers.ErrChannel)
}

// TestGoneAfterExpiry: an expired receiver is gone (410) for reads,
// messages and deletion until the expiry job purges it after the grace
// period; then it is not found (404). Another account never sees it.
func TestGoneAfterExpiry(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	account := testfactory.Account(t, tx)
	// Long ago, so that the expiry runs below touch no other test's rows in
	// the shared database.
	now := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	r := insertReceiver(t, tx, account, receivers.ChannelEmail, newAddress(), now.Add(time.Minute))

	got, err := receivers.Get(t.Context(), tx, account, r.ID, now)
	require.NoError(t, err)
	require.Equal(t, r.ID, got.ID)
	_, err = receivers.Get(t.Context(), tx, testfactory.Account(t, tx), r.ID, now)
	require.ErrorIs(t, err, receivers.ErrNotFound)

	later := r.ExpiresAt
	_, err = receivers.Get(t.Context(), tx, account, r.ID, later)
	var gone *receivers.GoneError
	require.ErrorAs(t, err, &gone)
	require.True(t, gone.ExpiresAt.Equal(r.ExpiresAt))
	require.ErrorIs(t, err, receivers.ErrExpired)
	_, err = receivers.ListMessages(t.Context(), tx, r, receivers.MessagePage{Limit: 10})
	require.NoError(t, err, "a listing trusts the receiver it is given")
	_, err = receivers.GetMessage(t.Context(), tx, account, r.ID, r.ID, later)
	require.ErrorAs(t, err, &gone)
	require.ErrorAs(t, receivers.Delete(t.Context(), tx, account, r.ID, later), &gone)

	// Within the grace period the row stays; after it the job purges it.
	res, err := receivers.Expire(t.Context(), tx, later.Add(receivers.PurgeGrace-time.Second))
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Marked, int64(1))
	_, err = receivers.Get(t.Context(), tx, account, r.ID, later)
	require.ErrorAs(t, err, &gone)
	_, err = receivers.Expire(t.Context(), tx, r.ExpiresAt.Add(receivers.PurgeGrace+time.Second))
	require.NoError(t, err)
	_, err = receivers.Get(t.Context(), tx, account, r.ID, later)
	require.ErrorIs(t, err, receivers.ErrNotFound)
}

// TestDeleteLiveReceiver: deleting removes the receiver; a second delete
// is not found.
func TestDeleteLiveReceiver(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	account := testfactory.Account(t, tx)
	now := testNow()
	r := insertReceiver(t, tx, account, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	require.ErrorIs(t, receivers.Delete(t.Context(), tx, testfactory.Account(t, tx), r.ID, now), receivers.ErrNotFound)
	require.NoError(t, receivers.Delete(t.Context(), tx, account, r.ID, now))
	require.ErrorIs(t, receivers.Delete(t.Context(), tx, account, r.ID, now), receivers.ErrNotFound)
}

// TestSMSPool: numbers are normalised to E.164; a duplicate is refused; a
// number held by a live receiver cannot be removed, one held by an expired
// receiver can.
func TestSMSPool(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	em := newEmitter(t)
	admin := receivers.PoolAdmin{AccountID: testfactory.Account(t, tx), KeyIdentifier: "mw_test"}

	n, err := receivers.NormalizeE164(" +1 (415) 555-01.00 ")
	require.NoError(t, err)
	require.Equal(t, "+14155550100", n)
	for _, bad := range []string{"14155550100", "+0415555010", "+12345", "+1234567890123456"} {
		_, err := receivers.NormalizeE164(bad)
		require.ErrorIs(t, err, receivers.ErrNotE164, bad)
	}

	phone := newPhone()
	_, err = receivers.AddNumber(t.Context(), tx, em, admin, phone)
	require.NoError(t, err)
	_, err = receivers.AddNumber(t.Context(), tx, em, admin, phone)
	var exists *receivers.NumberExistsError
	require.ErrorAs(t, err, &exists)

	now := testNow()
	held := insertSMSReceiver(t, tx, admin.AccountID, now.Add(time.Hour))
	err = receivers.RemoveNumber(t.Context(), tx, em, admin, held.Address, now)
	var heldErr *receivers.NumberHeldError
	require.ErrorAs(t, err, &heldErr)
	require.Equal(t, held.ID, heldErr.ReceiverID)
	require.NoError(t, receivers.RemoveNumber(t.Context(), tx, em, admin, held.Address, now.Add(2*time.Hour)))
	require.ErrorIs(t, receivers.RemoveNumber(t.Context(), tx, em, admin, held.Address, now), receivers.ErrNumberNotFound)
	require.ErrorIs(t, receivers.RemoveNumber(t.Context(), tx, em, admin, "not a number", now), receivers.ErrNumberNotFound)
	require.NoError(t, receivers.RemoveNumber(t.Context(), tx, em, admin, phone, now), "a free number")
	var audited int
	require.NoError(t, tx.QueryRow(t.Context(), "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'sms_pool_changed'",
		admin.AccountID).Scan(&audited))
	require.Equal(t, 3, audited, "one add and two removals")
}
