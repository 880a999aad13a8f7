package alerts_test

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/alerts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/jobs"
)

type fixture struct {
	tx      dbutil.Tx
	em      *events.Emitter
	account uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	f := &fixture{tx: dbtest.Tx(t), em: &events.Emitter{River: client}}
	f.account = f.newAccount(t)
	return f
}

func (f *fixture) newAccount(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := dbsqlc.New().AccountInsert(t.Context(), f.tx, dbsqlc.AccountInsertParams{ID: id, Email: id.String() + "@example.com", PasswordHash: "x"})
	require.NoError(t, err)
	return id
}

func (f *fixture) emit(t *testing.T, account uuid.UUID, typ string, sev events.Severity) dbsqlc.Event {
	t.Helper()
	et, ok := events.Lookup(typ)
	require.True(t, ok)
	row, err := f.em.Emit(t.Context(), f.tx, events.Event{AccountID: account, Type: typ, Severity: sev, Payload: et.Example, Domain: "example.com"})
	require.NoError(t, err)
	return row
}

// auditPayloads returns the payloads of the account's events of typ.
func (f *fixture) auditPayloads(t *testing.T, typ string) []map[string]any {
	t.Helper()
	rows, err := f.tx.Query(t.Context(), "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY id", f.account, typ)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestAcknowledgeTwice: the first acknowledgement is recorded with its
// audit event; the second is refused naming who acknowledged, and writes
// nothing; withdrawing clears it (audited with what was withdrawn), and a
// second withdrawal is refused.
func TestAcknowledgeTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alert := f.emit(t, f.account, events.TypeHealthScoreChanged, events.SeverityCritical)
	note := "DNS fixed"
	now := time.Now().UTC()

	row, err := alerts.Acknowledge(t.Context(), f.tx, f.em, f.account, alert.ID,
		alerts.Acknowledgement{By: "  alice ", Note: &note, KeyIdentifier: "mw_k1"}, now)
	require.NoError(t, err)
	require.Equal(t, "alice", *row.AcknowledgedBy)
	require.Equal(t, note, *row.AcknowledgedNote)

	_, err = alerts.Acknowledge(t.Context(), f.tx, f.em, f.account, alert.ID, alerts.Acknowledgement{By: "bob", KeyIdentifier: "mw_k2"}, now)
	var already *alerts.AlreadyAcknowledgedError
	require.ErrorAs(t, err, &already)
	require.Equal(t, `the alert is already acknowledged by "alice"; withdraw the acknowledgement (DELETE) first`, already.Error())
	acks := f.auditPayloads(t, events.TypeAlertAcknowledged)
	require.Len(t, acks, 1, "the refused acknowledgement is not audited")
	require.Equal(t, map[string]any{"alert_id": alert.ID.String(), "alert_type": events.TypeHealthScoreChanged,
		"acknowledged_by": "alice", "note": note, "key_identifier": "mw_k1"}, acks[0])

	cleared, err := alerts.Unacknowledge(t.Context(), f.tx, f.em, f.account, alert.ID, "mw_k3", now)
	require.NoError(t, err)
	require.Nil(t, cleared.AcknowledgedAt)
	_, err = alerts.Unacknowledge(t.Context(), f.tx, f.em, f.account, alert.ID, "mw_k3", now)
	require.ErrorIs(t, err, alerts.ErrNotAcknowledged)
	unacks := f.auditPayloads(t, events.TypeAlertUnacknowledged)
	require.Len(t, unacks, 1)
	require.Equal(t, "alice", unacks[0]["previously_acknowledged_by"])
	require.Equal(t, note, unacks[0]["previous_note"])
}

// TestAcknowledgeRefusals: a blank name is refused; an event that is not
// an alert, or another account's alert, is not found.
func TestAcknowledgeRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alert := f.emit(t, f.account, events.TypeHealthScoreChanged, events.SeverityCritical)
	info := f.emit(t, f.account, events.TypeDMARCReportReceived, "")
	theirs := f.emit(t, f.newAccount(t), events.TypeBounceSpike, events.SeverityCritical)
	now := time.Now()

	_, err := alerts.Acknowledge(t.Context(), f.tx, f.em, f.account, alert.ID, alerts.Acknowledgement{By: " \t"}, now)
	require.ErrorIs(t, err, alerts.ErrBlankAcknowledger)
	for _, id := range []uuid.UUID{info.ID, theirs.ID, uuid.Must(uuid.NewV7())} {
		_, err := alerts.Acknowledge(t.Context(), f.tx, f.em, f.account, id, alerts.Acknowledgement{By: "alice"}, now)
		require.ErrorIs(t, err, alerts.ErrNotFound)
		_, err = alerts.Unacknowledge(t.Context(), f.tx, f.em, f.account, id, "", now)
		require.ErrorIs(t, err, alerts.ErrNotFound)
	}
	require.Empty(t, f.auditPayloads(t, events.TypeAlertAcknowledged))
}
