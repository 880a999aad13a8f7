package events_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

type causeFixture struct {
	t       *testing.T
	em      *events.Emitter
	account uuid.UUID
	emit    func(typ, domain string, at time.Time, payload map[string]any) (uuid.UUID, map[string]any)
}

func newCauseFixture(t *testing.T) *causeFixture {
	db := dbtest.Tx(t)
	f := &causeFixture{t: t, em: newEmitter(t), account: testfactory.Account(t, db)}
	f.emit = func(typ, domain string, at time.Time, payload map[string]any) (uuid.UUID, map[string]any) {
		t.Helper()
		row, err := f.em.Emit(context.Background(), db, events.Event{AccountID: f.account, Type: typ, Domain: domain, At: at, Payload: payload})
		require.NoError(t, err)
		require.NoError(t, events.ValidatePayload(typ, row.Payload), "the stored payload keeps to the registry's schema")
		var p map[string]any
		require.NoError(t, json.Unmarshal(row.Payload, &p))
		return row.ID, p
	}
	return f
}

// causes decodes a payload's likely_causes (nil when absent).
func causes(t *testing.T, p map[string]any) []events.Cause {
	t.Helper()
	raw, ok := p["likely_causes"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	require.NoError(t, err)
	var out []events.Cause
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

var drop = map[string]any{"domain": "shop.example", "previous_score": 90, "score": 40, "delta": -50}

// TestLikelyCausesHealthDropAfterSPFChange: a health drop two hours after
// an SPF change that pushed the record past 10 lookups names the change
// first, with its records as evidence, then a new failing source of the
// day before; an event of another domain, one older than the window and
// a warning are not causes, and a warning carries no list.
func TestLikelyCausesHealthDropAfterSPFChange(t *testing.T) {
	t.Parallel()
	f := newCauseFixture(t)
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	spf, _ := f.emit(events.TypeDNSRecordChanged, "shop.example", at.Add(-2*time.Hour), map[string]any{"domain": "shop.example", "check": "spf",
		"before": map[string]any{"status": "pass", "records": []string{"v=spf1 include:_spf.google.com -all"}},
		"after":  map[string]any{"status": "permerror", "records": []string{"v=spf1 include:a include:b include:c include:d include:e include:f include:g include:h include:i include:j include:k -all"}}})
	src, _ := f.emit(events.TypeDMARCNewSource, "shop.example", at.Add(-30*time.Hour), map[string]any{"domain": "shop.example",
		"source_ip": "203.0.113.7", "ptr": "", "messages": 500, "failing": 500, "category": "threat_unknown"})
	f.emit(events.TypeDNSRecordChanged, "other.example", at.Add(-time.Hour), map[string]any{"domain": "other.example", "check": "spf",
		"before": map[string]any{"status": "pass", "records": []string{}}, "after": map[string]any{"status": "fail", "records": []string{}}})
	f.emit(events.TypeDMARCNewSource, "shop.example", at.Add(-events.CauseWindow-time.Minute), map[string]any{"domain": "shop.example",
		"source_ip": "198.51.100.1", "messages": 10, "failing": 10, "category": "threat_unknown"})

	_, p := f.emit(events.TypeHealthScoreChanged, "shop.example", at, drop)
	got := causes(t, p)
	require.Len(t, got, 2)
	require.Equal(t, spf, got[0].EventID, "the SPF change that broke a pass, first")
	require.Equal(t, events.TypeDNSRecordChanged, got[0].EventType)
	require.Equal(t, "spf", got[0].Evidence["check"])
	require.Contains(t, got[0].Evidence["after"], "records")
	require.Equal(t, 98, got[0].Score, "twice the weight of 50 for a broken pass, less 2/72 of half for its age")
	require.Equal(t, src, got[1].EventID)
	require.Equal(t, "203.0.113.7", got[1].Evidence["source_ip"])
	require.Less(t, got[1].Score, got[0].Score)

	// A fall that stays a warning carries no list.
	_, p = f.emit(events.TypeHealthScoreChanged, "shop.example", at.Add(time.Minute),
		map[string]any{"domain": "shop.example", "previous_score": 90, "score": 80, "delta": -10})
	require.NotContains(t, p, "likely_causes")
}

// TestLikelyCausesBounceSpikeAfterListing: a critical bounce spike names
// the listing of the IP that carries the domain's mail.
func TestLikelyCausesBounceSpikeAfterListing(t *testing.T) {
	t.Parallel()
	f := newCauseFixture(t)
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	listing, _ := f.emit(events.TypeBlocklistListed, "shop.example", at.Add(-20*time.Hour), map[string]any{"domain": "shop.example",
		"list": "Spamhaus ZEN", "zone": "zen.spamhaus.org", "kind": "ip", "target": "192.0.2.10", "codes": []any{}, "share": 0.9, "listed_share": 0.9})
	_, p := f.emit(events.TypeBounceSpike, "shop.example", at, map[string]any{"domain": "shop.example", "provider": "sendgrid",
		"window_minutes": 60, "rate": 0.2, "threshold": 0.05, "critical_threshold": 0.1, "bounces": 200, "sent": 1000})
	got := causes(t, p)
	require.Len(t, got, 1)
	require.Equal(t, listing, got[0].EventID)
	require.Equal(t, "192.0.2.10", got[0].Evidence["target"])
	require.Equal(t, "Listed on a blocklist", got[0].Title)
}

// TestLikelyCausesNone: with nothing before it, a critical event says so
// with an empty list; no cause is invented.
func TestLikelyCausesNone(t *testing.T) {
	t.Parallel()
	f := newCauseFixture(t)
	_, p := f.emit(events.TypeHealthScoreChanged, "shop.example", time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC), drop)
	require.Contains(t, p, "likely_causes")
	require.Empty(t, causes(t, p))
}
