package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDashboardDomainSources: the domain page lists a busy domain's first
// DMARC sources by volume and says how many there are, so the page costs
// the same however many IPs send as the domain.
func TestDashboardDomainSources(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	b.addDomain(t, acct.Key, "busy.example")
	// 40 unknown source IPs, 10.0.0.1 the busiest.
	_, err := b.db.Exec(context.Background(), `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned,
		spf_aligned, compliant, forwarded, failing)
		SELECT d.id, $2::date, '10.0.0.' || i, 1000 - i, 0, 0, 0, 0, 1000 - i FROM domains d, generate_series(1, 40) AS i
		WHERE d.account_id = $1`, acct.ID, time.Now().UTC().AddDate(0, 0, -1))
	require.NoError(t, err)

	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	resp, page := w.req("GET", "/domains/busy.example", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "<td>10.0.0.1</td>")
	require.Contains(t, page, "<td>10.0.0.15</td>")
	require.NotContains(t, page, "<td>10.0.0.16</td>", "past the page's listing")
	require.Contains(t, page, "The 15 busiest of 40 sources over the last 30 days.")
	require.Equal(t, 15, strings.Count(page, "<td>threat_unknown</td>"))
}
