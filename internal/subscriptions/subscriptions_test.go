package subscriptions_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func newService(t *testing.T) *subscriptions.Service {
	t.Helper()
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	return &subscriptions.Service{Guard: netguard.NewGuard(nil), Keyring: keyring, DefaultPlan: plans.Unlimited}
}

// TestURLRefusedByTheGuard: a destination on a private or loopback
// address, or not http(s), is refused on create and on update, as a field
// error on url.
func TestURLRefusedByTheGuard(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	svc := newService(t)
	account := testfactory.Account(t, tx)
	for _, u := range []string{"http://127.0.0.1/hook", "http://10.1.2.3/hook", "http://[::1]/hook", "ftp://93.184.215.14/hook"} {
		_, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: u}, time.Now())
		var fe *subscriptions.FieldError
		require.ErrorAs(t, err, &fe, u)
		require.Equal(t, "url", fe.Field)
	}
	rows, err := subscriptions.List(t.Context(), tx, account)
	require.NoError(t, err)
	require.Empty(t, rows)

	row, secret, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook"}, time.Now())
	require.NoError(t, err)
	require.Regexp(t, `^whsec_`, secret)
	require.NotContains(t, string(row.SecretCiphertext), secret, "the secret is stored sealed")
	private := "http://192.168.0.1/hook"
	_, err = svc.Update(t.Context(), tx, account, row.ID, subscriptions.Change{URL: &private})
	var fe *subscriptions.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "url", fe.Field)
}

// TestSubscriptionLimit: an account holds at most MaxPerAccount
// subscriptions; the one over is refused with a *LimitError.
func TestSubscriptionLimit(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	svc := newService(t)
	account := testfactory.Account(t, tx)
	for range subscriptions.MaxPerAccount {
		_, err := dbsqlc.New().SubscriptionInsert(t.Context(), tx, dbsqlc.SubscriptionInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: account, URL: "https://93.184.215.14/hook",
			SecretCiphertext: []byte("x"), SecretKeyID: "k",
		})
		require.NoError(t, err)
	}
	_, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/hook"}, time.Now())
	var limit *subscriptions.LimitError
	require.ErrorAs(t, err, &limit)
	require.Equal(t, subscriptions.MaxPerAccount, limit.Max)
}

// TestFilters: event types must be registered and distinct; filters are
// normalised; an update changes only what it names and null clears.
func TestFilters(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	svc := newService(t)
	account := testfactory.Account(t, tx)
	var fe *subscriptions.FieldError
	_, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/", EventTypes: []string{"bounce_spike", "bounce_spike"}}, time.Now())
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "event_types[1]", fe.Field)
	_, _, err = svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/", EventTypes: []string{"no_such_type"}}, time.Now())
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "event_types[0]", fe.Field)

	domain, tag := "Example.COM", "  prod "
	row, _, err := svc.Create(t.Context(), tx, account, subscriptions.New{URL: "https://93.184.215.14/", DomainFilter: &domain, TagFilter: &tag}, time.Now())
	require.NoError(t, err)
	require.Equal(t, "example.com", *row.DomainFilter)
	require.Equal(t, "prod", *row.TagFilter)

	var none *string
	off := false
	row, err = svc.Update(t.Context(), tx, account, row.ID, subscriptions.Change{DomainFilter: &none, Enabled: &off})
	require.NoError(t, err)
	require.Nil(t, row.DomainFilter)
	require.Equal(t, "prod", *row.TagFilter)
	require.False(t, row.Enabled)

	_, err = svc.Update(t.Context(), tx, testfactory.Account(t, tx), row.ID, subscriptions.Change{Enabled: &off})
	require.ErrorIs(t, err, subscriptions.ErrNotFound)
	require.ErrorIs(t, subscriptions.Delete(t.Context(), tx, account, uuid.Must(uuid.NewV7())), subscriptions.ErrNotFound)
}
