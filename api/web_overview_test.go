package api_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDashboardOverviewRanksDomains: the overview ranks the account's
// domains by health across all of them, not within the first page by name:
// of 14 domains, the lowest-scored come first whatever their names, a
// domain never scored comes after every scored one, and the overview links
// to the full list.
func TestDashboardOverviewRanksDomains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	// a-00 .. a-12 scored 50 .. 98 (names in the order of their scores),
	// zz-worst scored 5 (last by name), 0-unscored never scored (first by
	// name).
	_, err := b.db.Exec(context.Background(), `INSERT INTO domains (id, account_id, name, score, checked_at)
		SELECT gen_random_uuid(), $1::uuid, 'a-' || lpad(i::text, 2, '0') || '.example', 50 + 4 * i, now() FROM generate_series(0, 11) AS i
		UNION ALL SELECT gen_random_uuid(), $1::uuid, 'zz-worst.example', 5, now()
		UNION ALL SELECT gen_random_uuid(), $1::uuid, '0-unscored.example', NULL, NULL`, acct.ID)
	require.NoError(t, err)

	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	resp, page := w.req("GET", "/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var listed []string
	for _, m := range regexp.MustCompile(`<td><a href="/domains/([^"]+)">`).FindAllStringSubmatch(page, -1) {
		listed = append(listed, m[1])
	}
	require.Equal(t, []string{"zz-worst.example", "a-00.example", "a-01.example", "a-02.example", "a-03.example",
		"a-04.example", "a-05.example", "a-06.example", "a-07.example", "a-08.example"}, listed)
	require.Contains(t, page, `<a href="/domains">All 14 domains</a>`)
}
