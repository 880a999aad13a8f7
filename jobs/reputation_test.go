package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestReputationScheduleChecksDomains runs the periodic blocklist check
// through a real River client on its own queue: the scheduler queues a
// check of each domain with DMARC data, whose listed source IP raises one
// blocklist_listed.
func TestReputationScheduleChecksDomains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, `
2.0.0.127.bl.test.   300 A 127.0.0.2
10.2.0.192.bl.test.  300 A 127.0.0.2
`)
	lists, err := blocklist.ParseZones("bl.test")
	require.NoError(t, err)
	d := testfactory.AccountDomain(t, pool, "rep-job.test")
	_, err = pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned,
		compliant, forwarded, failing) VALUES ($1, current_date - 1, '192.0.2.10', 10, 10, 10, 10, 0, 0)`, d.ID)
	require.NoError(t, err)

	client, err := NewClient(Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Reputation: &reputation.Checker{Resolver: dnscheck.NewClient(srv.Addr(), time.Second), Lists: lists},
	}, Options{Concurrency: 2})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	_, err = client.Insert(ctx, reputation.ScheduleArgs{}, nil)
	require.NoError(t, err)

	deadline := time.Now().Add(30 * time.Second)
	for len(eventsOf(t, pool, d.AccountID, events.TypeBlocklistListed)) == 0 {
		require.True(t, time.Now().Before(deadline), "no blocklist_listed")
		time.Sleep(50 * time.Millisecond)
	}
	listed := eventsOf(t, pool, d.AccountID, events.TypeBlocklistListed)
	require.Len(t, listed, 1)
	require.Equal(t, "192.0.2.10", listed[0].Payload["target"])
	require.InDelta(t, 1.0, listed[0].Payload["share"], 1e-9)
}
