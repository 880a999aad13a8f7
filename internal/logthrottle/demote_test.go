package logthrottle

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDemoteRiverProducerCounts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	info := slog.New(Demote(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), RiverRoutine...))
	info.With("x", 1).Info("producer: Producer job counts", "queue", "default")
	require.Empty(t, buf.String(), "the periodic counts are not logged at info")
	info.Info("producer: started")
	require.Contains(t, buf.String(), "level=INFO msg=\"producer: started\"")
	info.Warn("producer: Producer job counts")
	require.Contains(t, buf.String(), "level=WARN", "only info is demoted")

	buf.Reset()
	debug := slog.New(Demote(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), RiverRoutine...))
	debug.InfoContext(context.Background(), "producer: Producer job counts", "queue", "default")
	require.Contains(t, buf.String(), "level=DEBUG msg=\"producer: Producer job counts\" queue=default")
}
