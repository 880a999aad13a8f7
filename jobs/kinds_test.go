package jobs

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
)

func TestKindsListsEveryWorker(t *testing.T) {
	t.Parallel()
	kinds := Kinds()
	require.Greater(t, len(kinds), 20, "River's registry was read: %v", kinds)
	for _, k := range []string{UsagePruneArgs{}.Kind(), events.DeliveryKind, domains.CheckArgs{}.Kind(), ReceiverExpireArgs{}.Kind()} {
		require.Contains(t, kinds, k)
	}
	require.IsNonDecreasing(t, kinds)
}

// TestRiverLoggerDemotesProducerCounts: River's periodic job counts are
// not logged at info.
func TestRiverLoggerDemotesProducerCounts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := riverLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Info("producer: Producer job counts", "queue", "default")
	require.Empty(t, buf.String())
	l.Info("producer: other")
	require.Contains(t, buf.String(), "producer: other")
}
