package logthrottle

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRepeatedWarningsAreCountedNotRepeated(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), 30*time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.state.now = func() time.Time { return now }
	log := slog.New(h).With("component", "producer")

	for i := range 1000 {
		log.Error("Error fetching jobs", "queue", "webhooks", "i", i)
		log.Info("fetched", "i", i)
		now = now.Add(10 * time.Millisecond) // 10 s in all
	}
	log.Warn("Error running listener")
	now = now.Add(25 * time.Second) // 35 s after the first error
	log.Error("Error fetching jobs", "queue", "webhooks")

	var errs, infos, listener int
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.Equal(t, "producer", rec["component"], "attributes of the logger are kept")
		switch rec["msg"] {
		case "Error fetching jobs":
			errs++
			last = rec
		case "fetched":
			infos++
		case "Error running listener":
			listener++
		}
	}
	require.Equal(t, 1000, infos, "info passes unthrottled")
	require.Equal(t, 1, listener, "another message has its own budget")
	require.Equal(t, 2, errs, "one line per message per 30 s")
	require.EqualValues(t, 999, last["suppressed"], "the next line says how many were dropped")
}

func TestNilLogger(t *testing.T) {
	require.Nil(t, Logger(nil, time.Second))
}
