package receivers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// TestDailyVolume: messages delivered to two receivers count on the day
// they were received, by channel; the counts outlive the purged receivers
// and are pruned after DayRetention; another account sees none of them.
func TestDailyVolume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	today := now.Truncate(24 * time.Hour)
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	mail := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	sms := insertSMSReceiver(t, tx, acct, now.Add(time.Hour))
	for _, at := range []time.Time{today.Add(-47 * time.Hour), today.Add(-time.Hour), today.Add(time.Second)} {
		_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(mail.Address), Recipients: []string{mail.Address}, ReceivedAt: at})
		require.NoError(t, err)
	}
	_, err := store.DeliverSMS(ctx, &twilio.InboundSMS{MessageSid: "SM" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		From: "+14155550100", To: sms.Address, Body: "code 123456"}, today.Add(time.Minute))
	require.NoError(t, err)

	read := func(account uuid.UUID) []receivers.Day {
		t.Helper()
		days, err := receivers.DailyVolume(ctx, tx, account, today.AddDate(0, 0, -3), today)
		require.NoError(t, err)
		return days
	}
	want := []receivers.Day{{Day: today.AddDate(0, 0, -3)}, {Day: today.AddDate(0, 0, -2), Email: 1},
		{Day: today.AddDate(0, 0, -1), Email: 1}, {Day: today, Email: 1, SMS: 1}}
	require.Equal(t, want, read(acct))
	require.Equal(t, int64(0), read(testfactory.Account(t, tx))[3].Email, "another account's receivers count nothing here")

	// The receivers purged a day after they expire: what arrived still counts.
	_, err = receivers.Expire(ctx, tx, now.Add(time.Hour+receivers.PurgeGrace+time.Minute))
	require.NoError(t, err)
	require.Empty(t, messagesOf(t, tx, mail.ID))
	require.Equal(t, want, read(acct))

	// Past DayRetention, the counts are pruned.
	res, err := receivers.Expire(ctx, tx, today.Add(receivers.DayRetention+24*time.Hour+time.Minute))
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.PrunedDays, int64(3))
	for _, d := range read(acct) {
		require.Zero(t, d.Email+d.SMS, d.Day)
	}
}
