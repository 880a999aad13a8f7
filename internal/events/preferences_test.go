package events_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestResolvePrecedence is the precedence table: required -> mute ->
// override -> group -> on, first match wins.
func TestResolvePrecedence(t *testing.T) {
	t.Parallel()
	on, off := new(bool), new(bool)
	*on = true
	for _, tc := range []struct {
		name     string
		required bool
		prefs    events.ChannelPrefs
		send     bool
		rule     string
	}{
		{"NothingSetIsOn", false, events.ChannelPrefs{}, true, "default"},
		{"GroupOff", false, events.ChannelPrefs{Group: off}, false, "group"},
		{"GroupOn", false, events.ChannelPrefs{Group: on}, true, "group"},
		{"OverrideOnBeatsGroupOff", false, events.ChannelPrefs{Override: on, Group: off}, true, "override"},
		{"OverrideOffBeatsGroupOn", false, events.ChannelPrefs{Override: off, Group: on}, false, "override"},
		{"OverrideOffWithoutGroup", false, events.ChannelPrefs{Override: off}, false, "override"},
		{"MuteBeatsOverrideOn", false, events.ChannelPrefs{Muted: true, Override: on, Group: on}, false, "mute"},
		{"MuteAlone", false, events.ChannelPrefs{Muted: true}, false, "mute"},
		{"RequiredBeatsMute", true, events.ChannelPrefs{Muted: true}, true, "required"},
		{"RequiredBeatsOverrideOff", true, events.ChannelPrefs{Override: off}, true, "required"},
		{"RequiredBeatsGroupOff", true, events.ChannelPrefs{Group: off}, true, "required"},
		{"RequiredBeatsEverything", true, events.ChannelPrefs{Muted: true, Override: off, Group: off}, true, "required"},
		{"RequiredNothingSet", true, events.ChannelPrefs{}, true, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := events.Resolve(tc.required, tc.prefs)
			require.Equal(t, events.Decision{Send: tc.send, Rule: tc.rule}, got)
		})
	}
}

// emitBundle is an account with a subscription to every type and a
// verified notification address, on one rolled-back transaction.
type emitBundle struct {
	db      dbutil.Executor
	em      *events.Emitter
	account uuid.UUID
}

func setupEmit(t *testing.T) *emitBundle {
	t.Helper()
	db := dbtest.Tx(t)
	account := testfactory.Account(t, db)
	ctx := context.Background()
	_, err := db.Exec(ctx, `INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES (gen_random_uuid(), $1, 'https://hooks.example.com/x', '\xdeadbeef', 'k1')`, account)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO notification_addresses (id, account_id, email, verified_at)
		VALUES (gen_random_uuid(), $1, 'ops@example.com', now())`, account)
	require.NoError(t, err)
	return &emitBundle{db: db, em: newEmitter(t), account: account}
}

// emit emits one event and counts what it queued: webhook deliveries and
// alert mail jobs.
func (b *emitBundle) emit(t *testing.T, ev events.Event) (deliveries, mails int) {
	t.Helper()
	ctx := context.Background()
	ev.AccountID = b.account
	tx, err := b.db.Begin(ctx)
	require.NoError(t, err)
	row, err := b.em.Emit(ctx, tx, ev)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, b.db.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, row.ID).Scan(&deliveries))
	require.NoError(t, b.db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'event_id' = $2`,
		events.AlertEmailKind, row.ID.String()).Scan(&mails))
	return deliveries, mails
}

func (b *emitBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.db.Exec(context.Background(), sql, append([]any{b.account}, args...)...)
	require.NoError(t, err)
}

func example(name string) any {
	ty, _ := events.Lookup(name)
	return ty.Example
}

func alert() events.Event {
	return events.Event{Type: events.TypeHealthScoreChanged, Payload: example(events.TypeHealthScoreChanged), Domain: "example.com"}
}

func audit() events.Event {
	return events.Event{Type: events.TypeAlertAcknowledged, Payload: example(events.TypeAlertAcknowledged), Severity: events.SeverityCritical}
}

func TestEmitConsultsPreferences(t *testing.T) {
	t.Parallel()
	t.Run("NothingSetSendsBoth", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		d, m := b.emit(t, alert())
		require.Equal(t, 1, d)
		require.Equal(t, 1, m)
	})
	t.Run("MutedGroupStopsWebhookAndEmail", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		b.exec(t, `INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'health', false, false)`)
		d, m := b.emit(t, alert())
		require.Zero(t, d, "no webhook delivery for a switched-off group")
		require.Zero(t, m, "no alert mail for a switched-off group")
		// Another group is untouched.
		d, _ = b.emit(t, events.Event{Type: events.TypeBounceSpike, Payload: example(events.TypeBounceSpike)})
		require.Equal(t, 1, d)
	})
	t.Run("OverrideBeatsGroupPerChannel", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		b.exec(t, `INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'health', false, false)`)
		b.exec(t, `INSERT INTO preference_overrides (account_id, event_type, email) VALUES ($1, 'health_score_changed', true)`)
		d, m := b.emit(t, alert())
		require.Zero(t, d, "webhook: the override leaves it to the group")
		require.Equal(t, 1, m, "email: the override turns it on")
	})
	t.Run("MuteBeatsOverride", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		b.exec(t, `INSERT INTO preference_overrides (account_id, event_type, email, webhook) VALUES ($1, 'health_score_changed', true, true)`)
		b.exec(t, `INSERT INTO notification_settings (account_id, mute_email) VALUES ($1, true)`)
		d, m := b.emit(t, alert())
		require.Equal(t, 1, d)
		require.Zero(t, m)
	})
	t.Run("RequiredAuditTypeStillGoesOut", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		b.exec(t, `INSERT INTO notification_settings (account_id, mute_email, mute_webhook) VALUES ($1, true, true)`)
		b.exec(t, `INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'audit', false, false)`)
		b.exec(t, `INSERT INTO preference_overrides (account_id, event_type, email, webhook) VALUES ($1, 'alert_acknowledged', false, false)`)
		d, m := b.emit(t, audit())
		require.Equal(t, 1, d, "a required type is pushed whatever the preferences")
		require.Equal(t, 1, m, "a required critical type is mailed whatever the preferences")
		// The same mutes stop a type that is not required.
		d, m = b.emit(t, alert())
		require.Zero(t, d)
		require.Zero(t, m)
	})
	t.Run("NoVerifiedAddressNoMail", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		b.exec(t, `UPDATE notification_addresses SET verified_at = NULL WHERE account_id = $1`)
		d, m := b.emit(t, alert())
		require.Equal(t, 1, d)
		require.Zero(t, m)
	})
	t.Run("NonCriticalIsNotMailedAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setupEmit(t)
		d, m := b.emit(t, events.Event{Type: events.TypeBounceSpike, Payload: example(events.TypeBounceSpike)})
		require.Equal(t, 1, d)
		require.Zero(t, m, "warnings go to the daily digest")
	})
}
