package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newEmitter(t *testing.T) *events.Emitter {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	return &events.Emitter{River: client}
}

func TestGroupsRequired(t *testing.T) {
	t.Parallel()
	// Audit types are required: preferences can never silence the trail.
	require.True(t, events.Required(events.TypeAlertAcknowledged))
	require.False(t, events.Required(events.TypeBounceSpike))
	require.False(t, events.Required("no_such_type"))
	seen := map[string]bool{}
	for _, g := range events.Groups() {
		require.False(t, seen[g.Name], "group %s listed twice", g.Name)
		seen[g.Name] = true
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	all := events.Types()
	require.GreaterOrEqual(t, len(all), 11)
	for _, name := range []string{
		events.TypeHealthScoreChanged, events.TypeBounceSpike, events.TypeComplaintSpike, events.TypeDNSRecordChanged,
		events.TypeWebhookDeliveryFailed, events.TypeDMARCReportReceived, events.TypeReceiverMessageReceived,
		events.TypeAlertAcknowledged, events.TypeAlertUnacknowledged, events.TypeMessageDeleted,
	} {
		_, ok := events.Lookup(name)
		require.True(t, ok, "the registry must hold %s", name)
	}
	for _, typ := range all {
		t.Run(typ.Name, func(t *testing.T) {
			t.Parallel()
			require.NotEmpty(t, typ.Description)
			_, ok := events.LookupGroup(typ.Group)
			require.True(t, ok, "type %s must belong to a known preference group, not %q", typ.Name, typ.Group)
			require.True(t, typ.DefaultSeverity.Valid())
			var schema map[string]any
			require.NoError(t, json.Unmarshal(typ.PayloadSchema, &schema))
			require.Equal(t, "object", schema["type"], "payloads are objects")
			require.NotEmpty(t, typ.Example, "every type has an example payload")
			require.NoError(t, events.ValidatePayload(typ.Name, typ.Example), "the example matches the schema")

			// The schema really constrains: an empty object misses the
			// required properties.
			err := events.ValidatePayload(typ.Name, []byte(`{}`))
			var pe *events.PayloadError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, events.ErrInvalidPayload)
			require.NotEmpty(t, pe.Problems)
		})
	}
}

func TestValidatePayload(t *testing.T) {
	t.Parallel()
	err := events.ValidatePayload("no_such_type", []byte(`{}`))
	require.ErrorIs(t, err, events.ErrUnknownType)

	err = events.ValidatePayload(events.TypeHealthScoreChanged, []byte(`{"domain":"example.com","previous_score":80,"score":140,"delta":"x"}`))
	var pe *events.PayloadError
	require.ErrorAs(t, err, &pe)
	paths := map[string]bool{}
	for _, p := range pe.Problems {
		paths[p.Path] = true
		require.NotEmpty(t, p.Message)
	}
	require.True(t, paths["/score"], "%v", pe.Problems)
	require.True(t, paths["/delta"], "%v", pe.Problems)
	require.Contains(t, pe.Error(), "/score")

	// Formats are asserted: a uuid field must hold a UUID.
	err = events.ValidatePayload(events.TypeMessageDeleted, []byte(`{"receiver_id":"nope","message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","key_identifier":"mw_AbCd"}`))
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/receiver_id", pe.Problems[0].Path)

	require.ErrorAs(t, events.ValidatePayload(events.TypeMessageDeleted, []byte(`{`)), &pe)
}

func TestEmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Tx(t)
	em := newEmitter(t)
	account := testfactory.Account(t, db)

	t.Run("DefaultSeverityAndEscalation", func(t *testing.T) {
		row, err := em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeBounceSpike, Domain: "example.com", Tags: []string{"prod"},
			Payload: json.RawMessage(`{"domain":"example.com","window_minutes":60,"rate":0.08,"threshold":0.05,"bounces":8,"sent":100}`)})
		require.NoError(t, err)
		require.Equal(t, "warning", row.Severity)
		require.Equal(t, []string{"prod"}, row.Tags)
		require.Equal(t, "example.com", *row.Domain)
		_, err = uuid.Parse(row.ID.String())
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), row.ID.Version())

		row, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeBounceSpike, Severity: events.SeverityCritical,
			Payload: json.RawMessage(`{"domain":"example.com","window_minutes":60,"rate":0.2,"threshold":0.05,"bounces":20,"sent":100}`)})
		require.NoError(t, err)
		require.Equal(t, "critical", row.Severity)
		require.Nil(t, row.Domain)
		require.Equal(t, []string{}, row.Tags)

		// The type's rule raises what a producer asks for, never lowers it.
		row, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeBounceSpike, Severity: events.SeverityInfo,
			Payload: json.RawMessage(`{"domain":"example.com","window_minutes":60,"rate":0.1,"threshold":0.05,"bounces":10,"sent":100}`)})
		require.NoError(t, err)
		require.Equal(t, "critical", row.Severity, "a rate twice the threshold is critical whoever emits it")
		row, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeDNSRecordChanged,
			Payload: json.RawMessage(`{"domain":"example.com","check":"spf","before":{"status":"pass","records":["v=spf1 -all"]},"after":{"status":"none","records":[]}}`)})
		require.NoError(t, err)
		require.Equal(t, "critical", row.Severity, "a passing check now missing is critical")
		row, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeDNSRecordChanged,
			Payload: json.RawMessage(`{"domain":"example.com","check":"spf","before":{"status":"fail","records":[]},"after":{"status":"pass","records":["v=spf1 -all"]}}`)})
		require.NoError(t, err)
		require.Equal(t, "warning", row.Severity)
	})

	t.Run("InvalidPayloadIsRefused", func(t *testing.T) {
		_, err := em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeBounceSpike, Payload: map[string]any{"domain": "example.com"}})
		require.ErrorIs(t, err, events.ErrInvalidPayload)
		_, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeBounceSpike, Payload: []int{1}})
		require.Error(t, err)
		_, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: "nope", Payload: map[string]any{}})
		require.ErrorIs(t, err, events.ErrUnknownType)
		_, err = em.Emit(ctx, db, events.Event{AccountID: account, Type: events.TypeMessageDeleted, Severity: "loud",
			Payload: json.RawMessage(events.Types()[0].Example)})
		require.Error(t, err)
		require.False(t, errors.Is(err, events.ErrUnknownType))
	})

	t.Run("EveryExampleEmits", func(t *testing.T) {
		for _, typ := range events.Types() {
			_, err := em.Emit(ctx, db, events.Event{AccountID: account, Type: typ.Name, Payload: typ.Example})
			require.NoError(t, err, typ.Name)
		}
	})
}
