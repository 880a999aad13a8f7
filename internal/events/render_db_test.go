package events_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// The stored rendering and a rendering of the row as read back must be the
// same JSON: listings send the former, single reads build the latter.
func TestEmittedRenderingMatchesTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	acct := testfactory.Account(t, tx)
	row, err := (&events.Emitter{}).Emit(ctx, tx, events.Event{
		AccountID: acct, Type: events.TypeDNSRecordChanged, Domain: "example.com", Tags: []string{"prod", "<eu>"},
		At: time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC),
		Payload: map[string]any{"domain": "example.com", "check": "spf",
			"before": map[string]any{"status": "pass", "records": []string{"v=spf1 -all"}},
			"after":  map[string]any{"status": "none", "records": []string{}}},
	})
	require.NoError(t, err)

	var stored string
	var back events.Rendered
	require.NoError(t, tx.QueryRow(ctx, "SELECT rendered, id, event_type, payload::text, created_at, severity, domain, tags FROM events WHERE id = $1", row.ID).
		Scan(&stored, &back.ID, &back.Type, &back.Payload, &back.CreatedAt, &back.Severity, &back.Domain, &back.Tags))
	var a, b any
	require.NoError(t, json.Unmarshal([]byte(stored), &a))
	require.NoError(t, json.Unmarshal(back.AppendJSON(nil), &b))
	require.Equal(t, b, a)
	require.Contains(t, stored, `"created_at":"2026-05-06T07:08:09.123456Z"`, "microseconds, as Postgres keeps them")
}
