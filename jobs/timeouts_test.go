package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/webhook"
)

// TestEveryJobEndsWithinTheRescueWindow holds the invariant that lets the
// default rescue window be short: no job kind's timeout exceeds
// MaxJobTimeout, and the default window leaves a margin beyond it, so a
// healthy job is never rescued (and run twice) while it still runs.
func TestEveryJobEndsWithinTheRescueWindow(t *testing.T) {
	require.LessOrEqual(t, (&DomainCheckWorker{}).Timeout(nil), MaxJobTimeout, "domain checks")
	require.Less(t, webhook.DefaultTimeout+finishTimeout, MaxJobTimeout, "a push and the transaction recording it")
	require.GreaterOrEqual(t, DefaultRescueAfter, MaxJobTimeout+rescueMargin)
	require.GreaterOrEqual(t, rescueMargin, webhook.DefaultTimeout, "a job cancelled at its timeout has time to record its outcome")
}
