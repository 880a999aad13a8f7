package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestMXScheduleReverifies runs the periodic re-verification through a
// real River client: the scheduler queues one verification per setup to
// watch, which verifies a pending setup whose records are published and
// marks a verified one whose MX went away lost.
func TestMXScheduleReverifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, "")
	good := testfactory.AccountDomain(t, pool, "mx-good.test")
	gone := testfactory.AccountDomain(t, pool, "mx-gone.test")
	s1, err := dnsfix.SetupMX(ctx, pool, good, "in")
	require.NoError(t, err)
	s2, err := dnsfix.SetupMX(ctx, pool, gone, "in")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE mx_setups SET state = 'verified' WHERE id = $1", s2.ID)
	require.NoError(t, err)
	require.NoError(t, srv.Add("in.mx-good.test. MX 10 mx.mailwatch.test.\n_mailwatch.in.mx-good.test. TXT \""+dnsfix.TokenValue(s1.Token)+"\"\n"))

	client, err := NewClient(Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Resolver: dnscheck.NewClient(srv.Addr(), time.Second),
		DNSFix:   &domains.FixDeps{MX: dnsfix.MXConfig{Host: "mx.mailwatch.test"}},
	}, Options{Concurrency: 4})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	_, err = client.Insert(ctx, domains.MXScheduleArgs{}, nil)
	require.NoError(t, err)

	state := func(id dbsqlc.MxSetup) string {
		var st string
		require.NoError(t, pool.QueryRow(ctx, "SELECT state FROM mx_setups WHERE id = $1", id.ID).Scan(&st))
		return st
	}
	deadline := time.Now().Add(30 * time.Second)
	for state(s1) != dnsfix.MXVerified || state(s2) != dnsfix.MXLost {
		require.True(t, time.Now().Before(deadline), "setups: %s, %s", state(s1), state(s2))
		time.Sleep(50 * time.Millisecond)
	}
	lost := eventsOf(t, pool, gone.AccountID, "mx_verification_lost")
	require.Len(t, lost, 1)
	require.Equal(t, "in.mx-gone.test", lost[0].Payload["name"])
}
