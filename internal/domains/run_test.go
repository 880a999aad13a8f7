package domains

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestCheckerRun: the one sequence the live lookup and the check job both
// run stores the snapshot and the score, recomputes the recommendations
// (here the missing DMARC record's), and applies nothing when the caller's
// part of the transaction fails.
func TestCheckerRun(t *testing.T) {
	t.Parallel()
	const name = "run.test"
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	var zone []string
	for _, l := range strings.Split(testfactory.GoodZone(name), "\n") {
		if !strings.HasPrefix(l, "_dmarc.") {
			zone = append(zone, l)
		}
	}
	srv := dnstest.Start(t, strings.Join(zone, "\n"))
	c := &Checker{DB: pool, Resolver: dnscheck.NewClient(srv.Addr(), time.Second), Emitter: &events.Emitter{}}
	recs := func(id any) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM dns_recommendations WHERE domain_id = $1", id).Scan(&n))
		return n
	}

	failed := testfactory.AccountDomain(t, pool, "failed."+name)
	boom := errors.New("boom")
	_, err := c.Run(ctx, failed, func(context.Context, pgx.Tx) error { return boom })
	require.ErrorIs(t, err, boom)
	row, err := dbsqlc.New().DomainGetByID(ctx, pool, failed.ID)
	require.NoError(t, err)
	require.Nil(t, row.CheckedAt, "the check is applied with the caller's part or not at all")
	require.Zero(t, recs(failed.ID))

	d := testfactory.AccountDomain(t, pool, name)
	inTx := 0
	run, err := c.Run(ctx, d, func(context.Context, pgx.Tx) error { inTx++; return nil })
	require.NoError(t, err)
	require.Equal(t, 1, inTx)
	require.True(t, run.Applied)
	require.Equal(t, dnscheck.StatusNone, run.Results.DMARC.Status)
	row, err = dbsqlc.New().DomainGetByID(ctx, pool, d.ID)
	require.NoError(t, err)
	require.NotNil(t, row.CheckedAt)
	require.True(t, row.CheckedAt.Equal(run.StartedAt.UTC().Truncate(time.Microsecond)))
	require.NotNil(t, row.Score)
	require.Equal(t, *row.Score, *run.Domain.Score)
	require.Positive(t, recs(d.ID), "recommendations follow the stored check")

	_, err = pool.Exec(ctx, "DELETE FROM domains WHERE id = $1", d.ID)
	require.NoError(t, err)
	_, err = c.Run(ctx, d, nil)
	require.ErrorIs(t, err, ErrDomainGone)
}
