package api_test

import (
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// nextLink checks the pagination headers of a page that has a next one:
// X-Next-Cursor and a Link (rel="next") to the same path whose cursor is
// that X-Next-Cursor. It returns the Link's target.
func nextLink(t *testing.T, resp response) string {
	t.Helper()
	cursor := resp.Header.Get("X-Next-Cursor")
	require.NotEmpty(t, cursor, "X-Next-Cursor of a page with a next page")
	m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(resp.Header.Get("Link"))
	require.NotNil(t, m, "Link of a page with a next page: %q", resp.Header.Get("Link"))
	u, err := url.Parse(m[1])
	require.NoError(t, err)
	require.Equal(t, cursor, u.Query().Get("cursor"), "the Link carries X-Next-Cursor")
	return m[1]
}

// lastPage checks that a page without a next one sends neither header.
func lastPage(t *testing.T, resp response) {
	t.Helper()
	require.Empty(t, resp.Header.Get("X-Next-Cursor"))
	require.Empty(t, resp.Header.Get("Link"))
}

// TestCursorListsDocumentBothPageHeaders walks every operation of the
// document: each one taking a cursor (a list) answers with the one page
// type, so it documents both X-Next-Cursor and Link; a new list that
// pages some other way fails here.
func TestCursorListsDocumentBothPageHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
			Responses map[string]struct {
				Headers map[string]any `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	resp.JSON(t, &doc)
	var lists []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			paged := false
			for _, p := range op.Parameters {
				paged = paged || (p.In == "query" && p.Name == "cursor")
			}
			if !paged {
				continue
			}
			lists = append(lists, op.OperationID)
			headers := op.Responses["200"].Headers
			require.Contains(t, headers, "X-Next-Cursor", "%s %s", method, path)
			require.Contains(t, headers, "Link", "%s %s", method, path)
		}
	}
	sort.Strings(lists)
	// The walk found the lists (a renamed parameter would make it vacuous).
	for _, op := range []string{"listReceivers", "listReceiverMessages", "listDMARCReports", "listDMARCFailureReports",
		"listTLSReports", "listEvents", "listAlerts", "listDeliveries", "adminSearchAccounts"} {
		require.Contains(t, lists, op)
	}
}
