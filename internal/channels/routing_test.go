package channels_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func testKeyring(t *testing.T) *secretbox.Keyring {
	t.Helper()
	k, err := secretbox.NewKeyring(make([]byte, secretbox.KeySize))
	require.NoError(t, err)
	return k
}

func ptr[T any](v T) *T { return &v }

// routingEnv is one account in a rolled-back transaction, an emitter that
// inserts its jobs there, and a service with the built-in hosts.
type routingEnv struct {
	tx      pgx.Tx
	em      *events.Emitter
	svc     *channels.Service
	account uuid.UUID
}

func newRoutingEnv(t *testing.T) *routingEnv {
	t.Helper()
	tx := dbtest.Tx(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	require.NoError(t, err)
	return &routingEnv{tx: tx, em: &events.Emitter{River: client}, svc: &channels.Service{Keyring: testKeyring(t)},
		account: testfactory.Account(t, tx)}
}

func (e *routingEnv) channel(t *testing.T, n channels.New) uuid.UUID {
	t.Helper()
	if n.URL == nil && n.Kind != channels.KindPagerDuty {
		n.URL = ptr("https://hooks.slack.com/services/T0/B0/x")
		if n.Kind == channels.KindTeams {
			n.URL = ptr("https://prod-01.westus.logic.azure.com:443/workflows/x")
		}
	}
	if n.Kind == channels.KindPagerDuty {
		n.RoutingKey = ptr(goldenKey)
	}
	row, err := e.svc.Create(context.Background(), e.tx, e.account, n)
	require.NoError(t, err)
	return row.ID
}

// sentTo emits ev and returns the channels its channel_send jobs name.
func (e *routingEnv) sentTo(t *testing.T, ev events.Event) []uuid.UUID {
	t.Helper()
	ev.AccountID = e.account
	row, err := e.em.Emit(context.Background(), e.tx, ev)
	require.NoError(t, err)
	rows, err := e.tx.Query(context.Background(), `SELECT (args->>'channel_id')::uuid FROM river_job
		WHERE kind = $1 AND args->>'event_id' = $2 ORDER BY 1`, events.ChannelSendKind, row.ID.String())
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	return ids
}

func healthEvent(domain string, from, to int, tags ...string) events.Event {
	return events.Event{Type: events.TypeHealthScoreChanged, Domain: domain, Tags: tags,
		Payload: map[string]any{"domain": domain, "previous_score": from, "score": to, "delta": to - from}}
}

// TestRouting: severity, group, domain and tag filters choose the
// channels; required groups ignore the group filter; PagerDuty only ever
// gets alerts; events about channels go to none.
func TestRouting(t *testing.T) {
	t.Parallel()
	e := newRoutingEnv(t)
	all := e.channel(t, channels.New{Kind: "slack", MinSeverity: "info"})
	healthCritical := e.channel(t, channels.New{Kind: "slack", Groups: []string{"health"}})
	healthWarning := e.channel(t, channels.New{Kind: "teams", Groups: []string{"health"}, MinSeverity: "warning"})
	warnDomain := e.channel(t, channels.New{Kind: "slack", MinSeverity: "warning", DomainFilter: ptr("Example.COM")})
	tagged := e.channel(t, channels.New{Kind: "teams", MinSeverity: "info", TagFilter: ptr("prod")})
	pdSending := e.channel(t, channels.New{Kind: "pagerduty", Groups: []string{"sending"}})
	pdAny := e.channel(t, channels.New{Kind: "pagerduty", MinSeverity: "info"})
	_ = pdSending

	sorted := func(ids ...uuid.UUID) []uuid.UUID {
		out := append([]uuid.UUID(nil), ids...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if out[j].String() < out[i].String() {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	}

	// A critical health drop on example.com tagged prod.
	require.Equal(t, sorted(all, healthCritical, healthWarning, warnDomain, tagged, pdAny),
		e.sentTo(t, healthEvent("example.com", 90, 40, "prod")))
	// A warning on another domain, untagged: no critical-only channel, no
	// PagerDuty, not the domain's or the tag's.
	require.Equal(t, sorted(all, healthWarning), e.sentTo(t, healthEvent("other.example", 90, 84)))
	// An info (a rise) goes only where info is asked for.
	require.Equal(t, sorted(all, tagged), e.sentTo(t, healthEvent("example.com", 40, 90, "prod")))
	// A required group (security) ignores the groups filter, not the
	// severity or the domain.
	pw := events.Event{Type: events.TypePasswordChanged, Payload: map[string]any{"key_identifier": "mw_x", "changed_at": "2026-03-01T12:00:00Z"}}
	require.Equal(t, sorted(all, healthWarning), e.sentTo(t, pw))
	// No cascades: a channel's own failure goes to no channel.
	failing := events.Event{Type: events.TypeNotificationChannelFailing, Payload: map[string]any{
		"channel_id": all.String(), "kind": "slack", "destination": "https://hooks.slack.com/…",
		"failing_since": "2026-03-01T12:00:00Z", "last_error": "Slack answered 404 Not Found"}}
	require.Empty(t, e.sentTo(t, failing))
}

// TestRoutingAcknowledgement: the acknowledgement events of an alert go to
// the PagerDuty channels that were sent the alert, and to no other
// PagerDuty channel.
func TestRoutingAcknowledgement(t *testing.T) {
	t.Parallel()
	e := newRoutingEnv(t)
	pdHealth := e.channel(t, channels.New{Kind: "pagerduty", Groups: []string{"health"}})
	pdSending := e.channel(t, channels.New{Kind: "pagerduty", Groups: []string{"sending"}})
	_ = pdSending
	alert, err := e.em.Emit(context.Background(), e.tx, func() events.Event {
		ev := healthEvent("example.com", 90, 40)
		ev.AccountID = e.account
		return ev
	}())
	require.NoError(t, err)
	for _, typ := range []string{events.TypeAlertAcknowledged, events.TypeAlertUnacknowledged} {
		payload := map[string]any{"alert_id": alert.ID.String(), "alert_type": alert.EventType, "key_identifier": "mw_x"}
		if typ == events.TypeAlertAcknowledged {
			payload["acknowledged_by"], payload["note"] = "oncall", nil
		} else {
			payload["previously_acknowledged_by"], payload["previous_note"] = "oncall", nil
		}
		require.Equal(t, []uuid.UUID{pdHealth}, e.sentTo(t, events.Event{Type: typ, Domain: "example.com", Payload: payload}), typ)
	}
}

// TestCreateChecks: bad fields are FieldErrors naming the field; the
// destination is sealed and shown redacted; the count is capped.
func TestCreateChecks(t *testing.T) {
	t.Parallel()
	e := newRoutingEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		n     channels.New
		field string
	}{
		{channels.New{Kind: "email"}, "kind"},
		{channels.New{Kind: "slack"}, "url"},
		{channels.New{Kind: "slack", URL: ptr("https://example.com/hook")}, "url"},
		{channels.New{Kind: "teams", URL: ptr("https://hooks.slack.com/services/x")}, "url"},
		{channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x"), RoutingKey: ptr(goldenKey)}, "routing_key"},
		{channels.New{Kind: "pagerduty"}, "routing_key"},
		{channels.New{Kind: "pagerduty", RoutingKey: ptr("short")}, "routing_key"},
		{channels.New{Kind: "pagerduty", RoutingKey: ptr(goldenKey), URL: ptr("https://api.pagerduty.com/x")}, "url"},
		{channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x"), MinSeverity: "urgent"}, "min_severity"},
		{channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x"), Groups: []string{"nope"}}, "groups"},
		{channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x"), DomainFilter: ptr("com")}, "domain_filter"},
		{channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x"), TagFilter: ptr("  ")}, "tag_filter"},
	} {
		_, err := e.svc.Create(ctx, e.tx, e.account, c.n)
		var fe *channels.FieldError
		require.ErrorAs(t, err, &fe, "%+v", c.n)
		require.Equal(t, c.field, fe.Field, "%+v: %v", c.n, err)
	}

	pd, err := e.svc.Create(ctx, e.tx, e.account, channels.New{Kind: "pagerduty", RoutingKey: ptr(goldenKey), Label: " pager "})
	require.NoError(t, err)
	require.Equal(t, "https://events.pagerduty.com/… key …bcde", pd.Destination)
	require.Equal(t, "pager", pd.Label)
	require.Equal(t, "critical", pd.MinSeverity)
	require.NotContains(t, string(pd.SecretCiphertext), goldenKey)

	for range channels.MaxPerAccount - 1 {
		e.channel(t, channels.New{Kind: "slack"})
	}
	_, err = e.svc.Create(ctx, e.tx, e.account, channels.New{Kind: "slack", URL: ptr("https://hooks.slack.com/services/x")})
	var le *channels.LimitError
	require.ErrorAs(t, err, &le)
}

// TestDeliverChecksHostsAgain: a destination the allow-list no longer
// admits is refused at send time, for good, and the channel says why.
func TestDeliverChecksHostsAgain(t *testing.T) {
	t.Parallel()
	e := newRoutingEnv(t)
	ctx := context.Background()
	hosts, err := channels.ParseAllowedHosts("127.0.0.1:9")
	require.NoError(t, err)
	e.svc.Hosts = hosts
	id := e.channel(t, channels.New{Kind: "slack", URL: ptr("http://127.0.0.1:9/hook")})
	ev := healthEvent("example.com", 90, 40)
	ev.AccountID = e.account
	row, err := e.em.Emit(ctx, e.tx, ev)
	require.NoError(t, err)

	builtin := &channels.Service{Keyring: e.svc.Keyring} // CHANNEL_ALLOWED_HOSTS unset since
	res, err := builtin.Deliver(ctx, e.tx, e.em, id, row.ID, time.Now())
	require.NoError(t, err)
	require.False(t, res.Delivered)
	require.False(t, res.Retryable)
	require.Contains(t, res.Error, "destination refused: must be an https URL")
	ch, err := channels.Get(ctx, e.tx, e.account, id)
	require.NoError(t, err)
	require.NotNil(t, ch.FailingSince)
	require.Equal(t, res.Error, *ch.LastError)

	// A deleted channel's queued send sends nothing.
	require.NoError(t, channels.Delete(ctx, e.tx, e.account, id))
	res, err = builtin.Deliver(ctx, e.tx, e.em, id, row.ID, time.Now())
	require.NoError(t, err)
	require.Equal(t, "the channel was deleted", res.Skipped)
}

// TestPruneAlerts: records of alerts that are gone are deleted once old
// enough; those of alerts still there are kept.
func TestPruneAlerts(t *testing.T) {
	t.Parallel()
	e := newRoutingEnv(t)
	ctx := context.Background()
	pd := e.channel(t, channels.New{Kind: "pagerduty"})
	ev := healthEvent("example.com", 90, 40)
	ev.AccountID = e.account
	alert, err := e.em.Emit(ctx, e.tx, ev)
	require.NoError(t, err)
	gone, recent := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err = e.tx.Exec(ctx, `INSERT INTO notification_channel_alerts (channel_id, alert_id, account_id, created_at)
		VALUES ($1, $2, $4, now() - interval '2 days'), ($1, $3, $4, now())`, pd, gone, recent, e.account)
	require.NoError(t, err)
	_, err = e.tx.Exec(ctx, `UPDATE notification_channel_alerts SET created_at = now() - interval '2 days' WHERE alert_id = $1`, alert.ID)
	require.NoError(t, err)

	n, err := channels.PruneAlerts(ctx, e.tx, time.Now().Add(-24*time.Hour))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(1))
	rows, err := e.tx.Query(ctx, `SELECT alert_id FROM notification_channel_alerts WHERE channel_id = $1 ORDER BY alert_id`, pd)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{alert.ID, recent}, left)
}
