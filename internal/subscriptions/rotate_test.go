package subscriptions_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

func newEmitter(t *testing.T) *events.Emitter {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	return &events.Emitter{River: client}
}

// TestRotateSecret: a rotation signs with the new secret and, until the
// grace ends, the replaced one; it is audited and schedules the retirement
// at the grace's end; a second rotation keeps only the newest two; a zero
// grace retires at once; another account's id is not found.
func TestRotateSecret(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	svc := newService(t)
	em := newEmitter(t)
	account := testfactory.Account(t, tx)
	now := time.Now().UTC().Truncate(time.Second)
	row, first, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook"}, now)
	require.NoError(t, err)

	r1, err := svc.Rotate(t.Context(), tx, em, account, row.ID, subscriptions.Rotation{KeyIdentifier: "mw_test"}, now)
	require.NoError(t, err)
	require.NotEqual(t, first, r1.Secret)
	require.Equal(t, now.Add(subscriptions.DefaultGrace), r1.Sub.PreviousSecretExpiresAt.UTC())
	cur, prev, err := subscriptions.OpenSecrets(svc.Keyring, r1.Sub, now)
	require.NoError(t, err)
	require.Equal(t, r1.Secret, cur)
	require.Equal(t, first, prev, "the replaced secret signs during the grace")
	cur, prev, err = subscriptions.OpenSecrets(svc.Keyring, r1.Sub, now.Add(subscriptions.DefaultGrace))
	require.NoError(t, err)
	require.Equal(t, r1.Secret, cur)
	require.Empty(t, prev, "and never after it, retired or not")

	var kind string
	var scheduled time.Time
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT kind, scheduled_at FROM river_job WHERE args->>'subscription_id' = $1`,
		row.ID.String()).Scan(&kind, &scheduled))
	require.Equal(t, "subscription_secret_retire", kind)
	require.Equal(t, now.Add(subscriptions.DefaultGrace), scheduled.UTC())
	var audited int
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2
		AND payload->>'subscription_id' = $3 AND payload->>'key_identifier' = 'mw_test'`,
		account, events.TypeSubscriptionSecretRotated, row.ID.String()).Scan(&audited))
	require.Equal(t, 1, audited)

	// Rotating again within the grace: the first secret is dropped.
	own := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5ZgtSImDvd0="
	grace := time.Hour
	r2, err := svc.Rotate(t.Context(), tx, em, account, row.ID, subscriptions.Rotation{Grace: &grace, SigningSecret: &own}, now)
	require.NoError(t, err)
	require.Equal(t, own, r2.Secret)
	cur, prev, err = subscriptions.OpenSecrets(svc.Keyring, r2.Sub, now)
	require.NoError(t, err)
	require.Equal(t, []string{own, r1.Secret}, []string{cur, prev})

	// The first job finds nothing due; at the hour the second retires.
	retired, err := subscriptions.RetireSecret(t.Context(), tx, row.ID, now.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, retired)
	retired, err = subscriptions.RetireSecret(t.Context(), tx, row.ID, now.Add(grace))
	require.NoError(t, err)
	require.True(t, retired)
	got, err := subscriptions.Get(t.Context(), tx, account, row.ID)
	require.NoError(t, err)
	require.Nil(t, got.PreviousSecretCiphertext)
	require.Nil(t, got.PreviousSecretExpiresAt)

	zero := time.Duration(0)
	r3, err := svc.Rotate(t.Context(), tx, em, account, row.ID, subscriptions.Rotation{Grace: &zero}, now)
	require.NoError(t, err)
	require.Nil(t, r3.Sub.PreviousSecretExpiresAt, "a zero grace retires the old secret at once")

	for _, bad := range []time.Duration{-time.Second, subscriptions.MaxGrace + time.Second} {
		_, err = svc.Rotate(t.Context(), tx, em, account, row.ID, subscriptions.Rotation{Grace: &bad}, now)
		var fe *subscriptions.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "grace_period_seconds", fe.Field)
	}
	weak := "whsec_c2hvcnQ="
	_, err = svc.Rotate(t.Context(), tx, em, account, row.ID, subscriptions.Rotation{SigningSecret: &weak}, now)
	var fe *subscriptions.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "signing_secret", fe.Field)

	other := testfactory.Account(t, tx)
	_, err = svc.Rotate(t.Context(), tx, em, other, row.ID, subscriptions.Rotation{}, now)
	require.ErrorIs(t, err, subscriptions.ErrNotFound)
	after, err := subscriptions.Get(t.Context(), tx, account, row.ID)
	require.NoError(t, err)
	cur, _, err = subscriptions.OpenSecrets(svc.Keyring, after, now)
	require.NoError(t, err)
	require.Equal(t, r3.Secret, cur, "refused rotations change nothing")
}
