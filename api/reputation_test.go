package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

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
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Reputation: &reputation.Checker{Resolver: dnscheck.NewClient(srv.Addr(), time.Second), Lists: lists},
	}, jobs.Options{Concurrency: 2, Queues: []string{queues.Reputation}})
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(stopCtx)
	})

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
