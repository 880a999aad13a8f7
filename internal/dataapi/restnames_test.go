package dataapi

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestRESTNameAliases reads every alias of RESTNames next to its column,
// through the data API, on rows of each table: the same value under both
// names, of the same type.
func TestRESTNameAliases(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 1)
	searchEvents(t, db, alice.id) // one of them has an acknowledged_note
	r := &Runner{DB: db}
	aliases := 0
	for _, n := range RESTNames {
		tab := Tables[n.Table]
		require.NotNil(t, tab, n.Table)
		col, ok := tab.column(n.Column)
		require.True(t, ok, "%s.%s", n.Table, n.Column)
		if !n.Alias {
			require.NotEmpty(t, n.Note, "%s.%s: a pair without an alias says why", n.Table, n.Column)
			continue
		}
		aliases++
		alias, ok := tab.column(n.Field)
		require.True(t, ok, "%s has no column %s", n.Table, n.Field)
		require.Equal(t, col.Type, alias.Type, "%s.%s", n.Table, n.Field)

		res, err := run(t, r, alice, n.Table, "select="+n.Column+","+n.Field+"&"+n.Field+"=not.is.null", false, false)
		require.NoError(t, err, n.Table)
		rows := rowsOf(t, res)
		require.NotEmpty(t, rows, "%s: seeded rows with %s set", n.Table, n.Column)
		for _, row := range rows {
			require.Equal(t, row[n.Column], row[n.Field], "%s.%s", n.Table, n.Field)
		}
	}
	require.Greater(t, aliases, 10)
}

// TestDocsListRESTNames holds docs/features/data-api.md's table of names to
// RESTNames.
func TestDocsListRESTNames(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/features/data-api.md")
	require.NoError(t, err)
	table := RESTNamesMarkdown()
	require.True(t, strings.Contains(string(doc), table),
		"docs/features/data-api.md must hold the table of REST names exactly as RESTNamesMarkdown renders it:\n%s", table)
}
