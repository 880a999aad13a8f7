package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPayload(t *testing.T) {
	t.Parallel()

	ts := time.Date(2026, 3, 4, 5, 6, 7, 123_000_000, time.FixedZone("CET", 3600))

	t.Run("Struct", func(t *testing.T) {
		t.Parallel()
		body, err := Payload("health_score_changed", ts, map[string]any{"domain": "example.com", "score": 42, "html": "<b>&</b>"})
		require.NoError(t, err)
		require.Equal(t, `{"type":"health_score_changed","timestamp":"2026-03-04T04:06:07.123Z","data":{"domain":"example.com","html":"<b>&</b>","score":42}}`, string(body))
	})

	t.Run("RawMessage", func(t *testing.T) {
		t.Parallel()
		body, err := Payload("test", ts.Truncate(time.Second), json.RawMessage(`{"id": "e1",  "n": 1}`))
		require.NoError(t, err)
		require.Equal(t, `{"type":"test","timestamp":"2026-03-04T04:06:07Z","data":{"id":"e1","n":1}}`, string(body))
	})

	t.Run("Deterministic", func(t *testing.T) {
		t.Parallel()
		b1, err := Payload("x", ts, map[string]int{"b": 2, "a": 1})
		require.NoError(t, err)
		b2, err := Payload("x", ts, map[string]int{"a": 1, "b": 2})
		require.NoError(t, err)
		require.Equal(t, b1, b2)
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		_, err := Payload("", ts, nil)
		require.EqualError(t, err, "error building webhook payload: empty event type")
		_, err = Payload("x", ts, func() {})
		require.ErrorContains(t, err, "error building webhook payload: json: unsupported type")
		_, err = Payload("x", ts, json.RawMessage(`{bad`))
		require.ErrorContains(t, err, "error building webhook payload")
	})
}
