package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/jobs"
)

// TestReputationEndToEnd: POST .../reputation/check queues a check that a
// real River worker runs against a loopback blocklist, and GET
// .../reputation then shows the listed source IP with its share of mail;
// another account's domain is a 404.
func TestReputationEndToEnd(t *testing.T) {
	t.Parallel()
	const name = "rep-e2e.test"
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, `
2.0.0.127.bl.test.   300 A   127.0.0.2
10.2.0.192.bl.test.  300 A   127.0.0.3
10.2.0.192.bl.test.  300 TXT "listed: see https://bl.test/"
test.dom.test.       300 A   127.0.0.2
`)
	lists, err := blocklist.ParseZones("bl.test,dom.test=domain")
	require.NoError(t, err)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	startReputationWorker(t, pool, srv, lists)

	acct := b.createAccount(t)
	d := createDomain(t, b, acct.Key, name)
	for _, r := range []struct {
		ip string
		n  int
	}{{"192.0.2.10", 40}, {"192.0.2.20", 60}} {
		_, err := pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
			compliant, forwarded, failing) SELECT id, current_date - 1, $2, $3, $3, $3, $3, 0, 0 FROM domains WHERE name = $1`,
			name, r.ip, r.n)
		require.NoError(t, err)
	}

	resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/reputation", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var before api.Reputation
	resp.JSON(t, &before)
	require.Empty(t, before.Targets, "nothing is watched before the first check")

	resp = b.do(t, "POST", "/api/accounts/me/domains/"+name+"/reputation/check", acct.Key, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var queued api.ReputationCheck
	resp.JSON(t, &queued)
	require.Equal(t, d.Domain, queued.Domain)
	require.NotZero(t, queued.JobID)

	var got api.Reputation
	eventually(t, 30*time.Second, "the check lists 192.0.2.10", func() bool {
		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/reputation", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		got = api.Reputation{}
		resp.JSON(t, &got)
		return got.ListedShare > 0
	})
	require.InDelta(t, 0.4, got.ListedShare, 1e-9)
	require.Len(t, got.Targets, 3, "two IPs and the domain")
	byTarget := map[string]api.WatchedTarget{}
	for _, tg := range got.Targets {
		byTarget[tg.Target] = tg
		require.NotNil(t, tg.CheckedAt, "%s checked", tg.Target)
	}
	listed := byTarget["192.0.2.10"]
	require.InDelta(t, 0.4, listed.Share, 1e-9)
	require.Len(t, listed.Listings, 1)
	require.Equal(t, "bl.test", listed.Listings[0].Zone)
	require.Equal(t, "127.0.0.3", listed.Listings[0].Codes[0].Code)
	require.Equal(t, "listed: see https://bl.test/", listed.Listings[0].Reason)
	require.Empty(t, byTarget["192.0.2.20"].Listings)
	require.Equal(t, "domain", byTarget[name].Kind)

	other := b.createAccount(t)
	for _, path := range []string{"/reputation", "/reputation/check"} {
		method := "GET"
		if path == "/reputation/check" {
			method = "POST"
		}
		resp := b.do(t, method, "/api/accounts/me/domains/"+name+path, other.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s %s: %s", method, path, resp.Body)
	}
}

// startReputationWorker runs a River worker of the reputation queue
// against the loopback lists until the test ends. The resolver waits 5 s:
// on a loaded machine a 1 s wait timed out, which decides nothing and left
// a target unchecked.
func startReputationWorker(t *testing.T, pool *pgxpool.Pool, srv *dnstest.Server, lists []blocklist.List) {
	t.Helper()
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Reputation: &reputation.Checker{Resolver: dnscheck.NewClient(srv.Addr(), 5*time.Second), Lists: lists},
	}, jobs.Options{Concurrency: 2, Queues: []string{queues.Reputation}})
	require.NoError(t, err)
	require.NoError(t, worker.Start(context.Background()))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(stopCtx)
	})
}

// TestReputationPins: POST .../reputation/pins pins a /30 and queues a
// check that a River worker runs: GET .../reputation shows the pin and its
// four addresses (origin pinned), the listed one with its listing. Bounds
// are 422 with a detail that says which, an overlap is 409, DELETE removes
// the pin and its addresses, and another account's domain is 404.
func TestReputationPins(t *testing.T) {
	t.Parallel()
	const name = "rep-pins.test"
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, `
2.0.0.127.bl.test.   300 A   127.0.0.2
10.2.0.192.bl.test.  300 A   127.0.0.2
test.dom.test.       300 A   127.0.0.2
`)
	lists, err := blocklist.ParseZones("bl.test,dom.test=domain")
	require.NoError(t, err)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	startReputationWorker(t, pool, srv, lists)
	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, name)
	pins := "/api/accounts/me/domains/" + name + "/reputation/pins"

	resp := b.do(t, "POST", pins, acct.Key, map[string]any{"cidr": "192.0.2.9/30", "note": "office relays"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var pin api.ReputationPin
	resp.JSON(t, &pin)
	require.Equal(t, "192.0.2.8/30", pin.CIDR)
	require.Equal(t, 4, pin.Addresses)
	require.Equal(t, "office relays", pin.Note)

	var got api.Reputation
	eventually(t, 30*time.Second, "the queued check lists 192.0.2.10", func() bool {
		resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/reputation", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		got = api.Reputation{}
		resp.JSON(t, &got)
		for _, tg := range got.Targets {
			if tg.Target == "192.0.2.10" && len(tg.Listings) == 1 {
				return true
			}
		}
		return false
	})
	require.Equal(t, []api.ReputationPin{pin}, got.Pins)
	origins := map[string]string{}
	for _, tg := range got.Targets {
		origins[tg.Target] = tg.Origin
	}
	require.Equal(t, map[string]string{"192.0.2.8": "pinned", "192.0.2.9": "pinned", "192.0.2.10": "pinned",
		"192.0.2.11": "pinned", name: "domain"}, origins)

	for _, c := range []struct {
		body   map[string]any
		status int
		detail string
	}{
		{map[string]any{"cidr": "192.0.2.0/23"}, http.StatusUnprocessableEntity, "cidr: 192.0.2.0/23 holds more than 256 addresses: pin a /24 or a longer prefix"},
		{map[string]any{"cidr": "2001:db8::/119"}, http.StatusUnprocessableEntity, "pin a /120 or a longer prefix"},
		{map[string]any{"cidr": "not-an-ip"}, http.StatusUnprocessableEntity, "cidr: \"not-an-ip\" is not an IP address or prefix"},
		{map[string]any{"cidr": "192.0.2.1", "note": strings.Repeat("x", 201)}, http.StatusUnprocessableEntity, "note"},
		{map[string]any{"cidr": "192.0.2.10"}, http.StatusConflict, "192.0.2.10/32 overlaps the pin 192.0.2.8/30"},
		{map[string]any{"cidr": "192.0.2.8/30"}, http.StatusConflict, "192.0.2.8/30 is pinned already"},
	} {
		resp := b.do(t, "POST", pins, acct.Key, c.body)
		require.Equal(t, c.status, resp.Status, "%v: %s", c.body, resp.Body)
		var eb api.ErrorBody
		resp.JSON(t, &eb)
		require.Contains(t, eb.Detail, c.detail, "%v", c.body)
	}
	for i := range 3 {
		resp := b.do(t, "POST", pins, acct.Key, map[string]any{"cidr": "198.51." + strconv.Itoa(i) + ".0/24"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	resp = b.do(t, "POST", pins, acct.Key, map[string]any{"cidr": "198.51.3.0/24"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "would bring the domain's pinned addresses to 1028, more than 1024")

	other := b.createAccount(t)
	resp = b.do(t, "POST", pins, other.Key, map[string]any{"cidr": "192.0.2.8/30"})
	require.Equal(t, http.StatusNotFound, resp.Status, "%s", resp.Body)
	resp = b.do(t, "DELETE", pins+"?cidr=192.0.2.8/30", other.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status, "%s", resp.Body)

	resp = b.do(t, "DELETE", pins+"?cidr=192.0.2.0/30", acct.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status, "no such pin: %s", resp.Body)
	resp = b.do(t, "DELETE", pins+"?cidr=192.0.2.9/30", acct.Key, nil)
	require.Equal(t, http.StatusNoContent, resp.Status, "any spelling of the pin: %s", resp.Body)
	resp = b.do(t, "GET", "/api/accounts/me/domains/"+name+"/reputation", acct.Key, nil)
	got = api.Reputation{}
	resp.JSON(t, &got)
	require.Len(t, got.Pins, 3)
	for _, tg := range got.Targets {
		require.NotContains(t, []string{"192.0.2.8", "192.0.2.9", "192.0.2.10", "192.0.2.11"}, tg.Target)
	}
}
