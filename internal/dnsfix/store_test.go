package dnsfix_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newDomainTx(t *testing.T) pgx.Tx { return dbtest.Tx(t) }

func newDomain(t *testing.T, tx pgx.Tx, name string) dbsqlc.Domain {
	t.Helper()
	ctx := context.Background()
	q := dbsqlc.New()
	acct, err := q.AccountInsert(ctx, tx, dbsqlc.AccountInsertParams{ID: uuid.Must(uuid.NewV7()), Email: uuid.NewString() + "@example.com", PasswordHash: "x"})
	require.NoError(t, err)
	d, err := q.DomainInsert(ctx, tx, dbsqlc.DomainInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: acct.ID, Name: name, Tags: []string{}})
	require.NoError(t, err)
	return d
}

func TestRecomputeStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := newDomain(t, tx, "states.example")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	noDMARC := &dnscheck.Results{DMARC: &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "none"}}}

	recs, err := dnsfix.Recompute(ctx, tx, d, noDMARC, dnsfix.Inputs{}, now)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	rec := recs[0]
	require.Equal(t, dnsfix.StateOpen, rec.State)
	require.Equal(t, "create", rec.Op)

	// Dismissed: stays dismissed while the observation is the same, and
	// keeps its id.
	_, err = dnsfix.Dismiss(ctx, tx, d.ID, rec.ID, "we publish DMARC elsewhere", nil, now)
	require.NoError(t, err)
	recs, err = dnsfix.Recompute(ctx, tx, d, noDMARC, dnsfix.Inputs{}, now)
	require.NoError(t, err)
	require.Equal(t, dnsfix.StateDismissed, recs[0].State)
	require.Equal(t, rec.ID, recs[0].ID)
	require.Equal(t, "we publish DMARC elsewhere", *recs[0].DismissedReason)

	// The observed record changes (a broken record appears): it reopens.
	changed := &dnscheck.Results{DMARC: &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "warn", Records: []string{"v=DMARC1; p=none; pct=10"}}}}
	recs, err = dnsfix.Recompute(ctx, tx, d, changed, dnsfix.Inputs{}, now)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, dnsfix.StateOpen, recs[0].State)
	require.Equal(t, rec.ID, recs[0].ID)
	require.Nil(t, recs[0].DismissedReason)
	require.Equal(t, []string{"v=DMARC1; p=none"}, recs[0].Proposed)
	require.Equal(t, "replace_rr", recs[0].Op)

	// Dismissed until a time: reopens once it passes.
	until := now.Add(time.Hour)
	_, err = dnsfix.Dismiss(ctx, tx, d.ID, rec.ID, "later", &until, now)
	require.NoError(t, err)
	recs, err = dnsfix.Recompute(ctx, tx, d, changed, dnsfix.Inputs{}, now.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, dnsfix.StateOpen, recs[0].State)

	// Restore of an open one is a state error; of a dismissed one, open.
	_, err = dnsfix.Restore(ctx, tx, d.ID, rec.ID)
	require.ErrorIs(t, err, dnsfix.ErrState)
	_, err = dnsfix.Dismiss(ctx, tx, d.ID, rec.ID, "x", nil, now)
	require.NoError(t, err)
	r, err := dnsfix.Restore(ctx, tx, d.ID, rec.ID)
	require.NoError(t, err)
	require.Equal(t, dnsfix.StateOpen, r.State)

	// Apply without a connection: ErrNoConnection, nothing queued.
	enqueued := false
	_, err = dnsfix.StartApply(ctx, tx, d.ID, rec.ID, "", func(context.Context, pgx.Tx) (int64, error) { enqueued = true; return 1, nil })
	require.ErrorIs(t, err, dnsfix.ErrNoConnection)
	require.False(t, enqueued)
	var ce *dnsfix.ConflictError
	_, err = dnsfix.StartApply(ctx, tx, d.ID, rec.ID, "stale", nil)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"v=DMARC1; p=none; pct=10"}, ce.Current)

	// Another domain's recommendation is not found.
	other := newDomain(t, tx, "other.example")
	_, err = dnsfix.Dismiss(ctx, tx, other.ID, rec.ID, "x", nil, now)
	require.ErrorIs(t, err, dnsfix.ErrNotFound)

	// Fixed: the recommendation goes away.
	fixed := &dnscheck.Results{DMARC: &dnscheck.DMARCResult{Result: dnscheck.Result{Status: "pass", Records: []string{"v=DMARC1; p=reject"}}}}
	recs, err = dnsfix.Recompute(ctx, tx, d, fixed, dnsfix.Inputs{}, now)
	require.NoError(t, err)
	require.Empty(t, recs)
	rows, err := dbsqlc.New().DNSRecommendationListByDomain(ctx, tx, d.ID)
	require.NoError(t, err)
	require.Empty(t, rows)
}
