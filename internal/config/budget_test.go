package config

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fleet the issue describes (2 API, 2 workers, 1 SMTP) at the default
// pool of 20 does not fit max_connections=100; the advice it prints does.
func TestFleetBudgetAtDefaultPoolsExceeds100(t *testing.T) {
	f := Fleet{API: 2, Workers: 2, SMTP: 1, DBMaxConns: 20}
	require.Equal(t, 2*21+2*21+20, f.Connections())

	var out bytes.Buffer
	require.False(t, WriteBudget(&out, f, 100, 3))
	require.Contains(t, out.String(), "does NOT fit: 7 over")
	c := f.MaxPoolFor(97)
	require.Contains(t, out.String(), "DB_MAX_CONNS=18 or lower")
	require.Equal(t, 18, c)
	f.DBMaxConns = c
	require.LessOrEqual(t, f.Connections(), 97)
	f.DBMaxConns = c + 1
	require.Greater(t, f.Connections(), 97, "MaxPoolFor gives the largest pool that fits")

	out.Reset()
	require.True(t, WriteBudget(&out, Fleet{API: 2, Workers: 2, SMTP: 1, UI: 1, DBMaxConns: 10}, 100, 3))
	require.Contains(t, out.String(), "fits, with 33 to spare")
}

func TestFleetBudgetTooManyProcesses(t *testing.T) {
	var out bytes.Buffer
	require.False(t, WriteBudget(&out, Fleet{API: 40, Workers: 10, DBMaxConns: 2}, 100, 3))
	require.Contains(t, out.String(), "raise max_connections to at least 153")
	require.Zero(t, Fleet{API: 40, Workers: 10}.MaxPoolFor(97))
}
