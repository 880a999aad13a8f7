package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The MX probe benchmark's rig works: every loopback host (DANE on one in
// ten) is probed ok, so the figures measure probes, not failures.
func TestRunTransportProbes(t *testing.T) {
	t.Parallel()
	res, err := runTransportProbes(context.Background(), 40)
	require.NoError(t, err)
	require.Positive(t, res.rate)
	require.LessOrEqual(t, res.p50, res.p99)
}
