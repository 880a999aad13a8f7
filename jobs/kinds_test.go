package jobs

import (
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
