package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/emailaddr"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/password"
	"github.com/mailwatch/mailwatch/internal/signin"
)

const testPassword = "correct horse battery"

func testService(t *testing.T) *Service {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	require.NoError(t, err)
	return &Service{River: client, Emitter: &events.Emitter{River: client}, Passwords: password.NewLimiter(2, time.Minute)}
}

func uniqueEmail(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "") + "@example.com"
}

func countRows(t *testing.T, tx pgx.Tx, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestCreateUpdateDelete: the account's lifecycle and its refusals.
func TestCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	s := testService(t)
	email := uniqueEmail("alice")

	var field *FieldError
	_, err := s.Create(ctx, tx, "Alice <"+email+">", testPassword)
	require.ErrorAs(t, err, &field)
	require.Equal(t, "email", field.Field)
	require.ErrorIs(t, err, emailaddr.ErrInvalid)
	_, err = s.Create(ctx, tx, email, "short")
	require.ErrorAs(t, err, &field)
	require.Equal(t, "password", field.Field)

	c, err := s.Create(ctx, tx, "  "+strings.ToUpper(email)+" ", testPassword)
	require.NoError(t, err)
	require.Equal(t, email, c.Account.Email, "stored normalised")
	require.Equal(t, "default", c.Key.Label)
	require.True(t, strings.HasPrefix(c.Plain, c.Key.KeyIdentifier))
	require.Equal(t, 1, countRows(t, tx, "SELECT count(*) FROM notification_addresses WHERE account_id = $1 AND email = $2", c.Account.ID, email),
		"the sign-in address is a notification address")
	_, err = s.Create(ctx, tx, strings.ToUpper(email), testPassword)
	require.ErrorIs(t, err, ErrEmailTaken)

	other, err := s.Create(ctx, tx, uniqueEmail("bob"), testPassword)
	require.NoError(t, err)
	_, err = s.Update(ctx, tx, c.Account.ID, Change{Email: &other.Account.Email})
	require.ErrorIs(t, err, ErrEmailTaken)
	_, err = s.Update(ctx, tx, uuid.Must(uuid.NewV7()), Change{})
	require.ErrorIs(t, err, ErrNotFound)

	// A password change refuses older tokens, ends sessions, forgets devices.
	_, err = dbsqlc.New().WebSessionInsert(ctx, tx, dbsqlc.WebSessionInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: c.Account.ID, TokenHash: []byte("h"), ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	pw := testPassword + "!"
	_, err = s.Update(ctx, tx, c.Account.ID, Change{Password: &pw, KeyIdentifier: c.Key.KeyIdentifier})
	require.NoError(t, err)
	st, err := Get(ctx, tx, c.Account.ID)
	require.NoError(t, err)
	require.NotNil(t, st.CredentialsChangedAt)
	require.Zero(t, countRows(t, tx, "SELECT count(*) FROM web_sessions WHERE account_id = $1", c.Account.ID))
	require.Equal(t, 1, countRows(t, tx, "SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2", c.Account.ID, events.TypePasswordChanged))

	d, err := s.MarkDeleting(ctx, tx, c.Account.ID)
	require.NoError(t, err)
	require.Len(t, d.KeyHashes, 1)
	require.Equal(t, "account_delete", countKind(t, tx, d.JobID))
	_, err = s.Create(ctx, tx, email, testPassword)
	require.ErrorIs(t, err, ErrEmailBeingDeleted, "the email stays taken until the purge")
	_, err = s.MarkDeleting(ctx, tx, uuid.Must(uuid.NewV7()))
	require.ErrorIs(t, err, ErrNotFound)
}

func countKind(t *testing.T, tx pgx.Tx, jobID int64) string {
	t.Helper()
	var kind string
	require.NoError(t, tx.QueryRow(context.Background(), "SELECT kind FROM river_job WHERE id = $1", jobID).Scan(&kind))
	return kind
}

// TestAPIKeys: the cap, unique labels and the last key.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	c, err := testService(t).Create(ctx, tx, uniqueEmail("keys"), testPassword)
	require.NoError(t, err)
	id := c.Account.ID

	var taken *KeyLabelTakenError
	_, _, err = CreateKey(ctx, tx, id, "default")
	require.ErrorAs(t, err, &taken)
	require.Equal(t, "default", taken.Label)
	for i := 1; i < MaxActiveAPIKeys; i++ {
		_, _, err := CreateKey(ctx, tx, id, "k"+uuid.NewString())
		require.NoError(t, err)
	}
	var tooMany *TooManyKeysError
	_, _, err = CreateKey(ctx, tx, id, "one too many")
	require.ErrorAs(t, err, &tooMany)

	keys, err := ListKeys(ctx, tx, id)
	require.NoError(t, err)
	require.Len(t, keys, MaxActiveAPIKeys)
	for _, k := range keys[1:] {
		_, err := RevokeKey(ctx, tx, id, k.ID)
		require.NoError(t, err)
	}
	_, err = RevokeKey(ctx, tx, id, keys[0].ID)
	require.ErrorIs(t, err, ErrLastKey)
	_, err = RevokeKey(ctx, tx, id, keys[1].ID)
	require.ErrorIs(t, err, ErrKeyNotFound, "revoked already")
}

// TestSuspendUnsuspend: an admin's suspension and its refusals.
func TestSuspendUnsuspend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	s := testService(t)
	adm, err := s.Create(ctx, tx, uniqueEmail("admin"), testPassword)
	require.NoError(t, err)
	target, err := s.Create(ctx, tx, uniqueEmail("target"), testPassword)
	require.NoError(t, err)
	admin := Admin{AccountID: adm.Account.ID, KeyIdentifier: adm.Key.KeyIdentifier}

	var field *FieldError
	_, err = s.Suspend(ctx, tx, admin, target.Account.ID, "  ")
	require.ErrorAs(t, err, &field)
	require.ErrorIs(t, err, ErrBlank)
	_, err = s.Suspend(ctx, tx, admin, admin.AccountID, "x")
	require.ErrorIs(t, err, ErrSuspendSelf)
	_, err = s.Suspend(ctx, tx, admin, uuid.Must(uuid.NewV7()), "x")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.Unsuspend(ctx, tx, admin, target.Account.ID)
	require.ErrorIs(t, err, ErrNotSuspended)

	ch, err := s.Suspend(ctx, tx, admin, target.Account.ID, " unpaid ")
	require.NoError(t, err)
	require.NotNil(t, ch.Account.SuspendedAt)
	require.Equal(t, "unpaid", *ch.Account.SuspendedReason)
	require.Len(t, ch.KeyHashes, 1)
	var payload map[string]any
	require.NoError(t, tx.QueryRow(ctx, "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2",
		target.Account.ID, events.TypeAccountSuspended).Scan(&payload))
	require.Equal(t, adm.Account.Email, payload["admin_email"])
	require.Equal(t, "unpaid", payload["reason"])
	_, err = s.Suspend(ctx, tx, admin, target.Account.ID, "again")
	require.ErrorIs(t, err, ErrAlreadySuspended)

	ch, err = s.Unsuspend(ctx, tx, admin, target.Account.ID)
	require.NoError(t, err)
	require.Nil(t, ch.Account.SuspendedAt)

	_, err = s.MarkDeleting(ctx, tx, target.Account.ID)
	require.NoError(t, err)
	_, err = s.Suspend(ctx, tx, admin, target.Account.ID, "x")
	require.ErrorIs(t, err, ErrDeleting)
}

// TestSignIn: one password check for every route, charged to the budget.
func TestSignIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	s := testService(t)
	email := uniqueEmail("signin")
	c, err := s.Create(ctx, tx, email, testPassword)
	require.NoError(t, err)

	for _, raw := range []string{"not an address", uniqueEmail("nobody")} {
		_, err = s.SignIn(ctx, tx, raw, testPassword, "", false)
		require.ErrorIs(t, err, ErrWrongPassword, raw)
	}
	in, err := s.SignIn(ctx, tx, " "+strings.ToUpper(email), testPassword, "", true)
	require.NoError(t, err)
	require.Equal(t, c.Account.ID, in.Account)
	require.True(t, signin.WellFormed(in.Device), "remember gives a device token")

	for range signin.FreeFailures {
		_, err = s.SignIn(ctx, tx, email, "wrong password", "", false)
		require.ErrorIs(t, err, ErrWrongPassword)
	}
	var limited *signin.LimitedError
	_, err = s.SignIn(ctx, tx, email, testPassword, "", false)
	require.ErrorAs(t, err, &limited, "the unknown clients' budget is closed, the right password too")
	_, err = s.SignIn(ctx, tx, email, testPassword, in.Device, false)
	require.NoError(t, err, "the known device has a budget of its own")

	adm, err := s.Create(ctx, tx, uniqueEmail("admin"), testPassword)
	require.NoError(t, err)
	_, err = s.Suspend(ctx, tx, Admin{AccountID: adm.Account.ID}, c.Account.ID, "abuse")
	require.NoError(t, err)
	var susp *SuspendedError
	_, err = s.SignIn(ctx, tx, email, testPassword, in.Device, false)
	require.ErrorAs(t, err, &susp)
	require.Contains(t, susp.Error(), "suspended: abuse")
	require.False(t, errors.Is(err, ErrWrongPassword))
}
