package dataapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestDMARCSubdomainsView: the view sums each name's daily counters over
// the last 30 UTC days as the caller, under the counters' own policy.
func TestDMARCSubdomainsView(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 0)
	seed(t, db, 0) // another tenant, with its own name and counters
	res, err := run(t, &Runner{DB: db}, alice, "dmarc_subdomains", "select=name,messages,passing,dns_exists", false, false)
	require.NoError(t, err)
	rows := rowsOf(t, res)
	require.Len(t, rows, 1)
	require.EqualValues(t, 3, rows[0]["messages"], "its own counters only")
	require.EqualValues(t, 2, rows[0]["passing"])
	require.Nil(t, rows[0]["dns_exists"])
}
