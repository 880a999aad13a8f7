package api_test

import (
	"context"
	"net/http"
	"net/url"
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

// TestDashboardDomainBlocklists: the domain page's Blocklists section shows
// each watched IP with its share of mail and its listings, with the
// delisting link of a catalog list.
func TestDashboardDomainBlocklists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	b.addDomain(t, acct.Key, "listed.example")
	ctx := context.Background()
	_, err := b.db.Exec(ctx, `INSERT INTO reputation_targets (account_id, domain_id, target, kind, origin, messages, share, checked_at)
		SELECT account_id, id, '192.0.2.10', 'ip', 'report', 40, 0.4, now() FROM domains WHERE account_id = $1`, acct.ID)
	require.NoError(t, err)
	_, err = b.db.Exec(ctx, `INSERT INTO reputation_listings (account_id, domain_id, zone, target, codes, listed_at)
		SELECT account_id, id, 'zen.spamhaus.org', '192.0.2.10',
			'[{"code":"127.0.0.2","name":"SBL","meaning":"spam source","informational":false}]', now()
		FROM domains WHERE account_id = $1`, acct.ID)
	require.NoError(t, err)

	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	resp, page := w.req("GET", "/domains/listed.example", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "<h2>Blocklists</h2>")
	require.Contains(t, page, `<td>192.0.2.10</td><td><span class="hint">source in reports</span></td><td>40.0%</td>`)
	require.Contains(t, page, "<strong>Spamhaus ZEN</strong> SBL")
	require.Contains(t, page, "Listed IPs carry <strong>40.0%</strong>")
	require.Contains(t, page, ">delist</a>")
}

// TestDashboardDomainPins: the Blocklists section's form pins a range, whose
// addresses then show as pinned targets; a range past the bounds is refused
// with the API's reason, and the pin's button removes it.
func TestDashboardDomainPins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	b.addDomain(t, acct.Key, "pins.example")
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	tok := w.csrf("/domains/pins.example")

	resp, _ := w.req("POST", "/domains/pins.example/pins", url.Values{"csrf": {tok}, "cidr": {"192.0.2.9/30"}, "note": {"relays"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page := w.req("GET", "/domains/pins.example", nil)
	require.Contains(t, page, "pinned 192.0.2.8/30; a check is queued")
	require.Contains(t, page, `<span class="mono">192.0.2.8/30</span> (4 addresses) <span class="hint">relays</span>`)
	require.Equal(t, 4, strings.Count(page, `<td><span class="hint">pinned</span></td>`))

	resp, _ = w.req("POST", "/domains/pins.example/pins", url.Values{"csrf": {tok}, "cidr": {"10.0.0.0/8"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = w.req("GET", "/domains/pins.example", nil)
	require.Contains(t, page, "holds more than 256 addresses: pin a /24 or a longer prefix")

	resp, _ = w.req("POST", "/domains/pins.example/pins/remove", url.Values{"csrf": {tok}, "cidr": {"192.0.2.8/30"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = w.req("GET", "/domains/pins.example", nil)
	require.Contains(t, page, "unpinned 192.0.2.8/30")
	require.NotContains(t, page, `<span class="hint">pinned</span>`)
}
