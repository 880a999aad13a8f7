package reputation_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/jobs"
)

// TestDKIMDomainOfAReportIsWatched: a report fixture whose one record is
// signed d=toptierhighticket.club, ingested as the parse job does, puts
// that name on the domain list beside the domain itself (whose return path
// it also is: watched once), and its listing raises blocklist_listed.
func TestDKIMDomainOfAReportIsWatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	srv := dnstest.Start(t, `
2.0.0.127.bl.test.               300 A   127.0.0.2
test.dom.test.                   300 A   127.0.0.2
toptierhighticket.club.dom.test. 300 A   127.0.0.2
toptierhighticket.club.dom.test. 300 TXT "phish"
`)
	lists, err := blocklist.ParseZones("bl.test, dom.test=domain")
	require.NoError(t, err)
	c := &reputation.Checker{Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second), Lists: lists}

	// The report covers 2018-09-05.
	now := time.Date(2018, 9, 7, 12, 0, 0, 0, time.UTC)
	d := testfactory.AccountDomain(t, tx, "example.com")
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	svc := &reports.Service{DB: tx, River: client, Emitter: &events.Emitter{River: client}, Now: func() time.Time { return now }}
	var rec reports.Received
	require.NoError(t, pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
		rec, err = svc.Receive(ctx, tx, reports.Incoming{AccountID: d.AccountID, DomainID: d.ID, Kind: reports.KindDMARC,
			Source: reports.SourceUpload, Raw: corpus.Read(t, "dmarc/addisonfoods.com!example.com!1536105600!1536191999.xml")})
		return err
	}))
	out, err := svc.Parse(ctx, rec.MessageID)
	require.NoError(t, err)
	require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)

	checked, err := c.Check(ctx, tx, d.ID, now)
	require.NoError(t, err)
	require.Equal(t, 2, checked.Targets, "the domain and its DKIM signing domain; the failing source is nobody's sender")
	require.Equal(t, int64(2), srv.QueriesFor("toptierhighticket.club.dom.test."), "looked up on the domain list (A, then TXT for the reason)")
	require.Equal(t, int64(1), srv.QueriesFor("example.com.dom.test."), "the domain, once")
	require.Equal(t, 1, checked.Listed)

	st, err := reputation.Read(ctx, tx, lists, d.AccountID, d.ID)
	require.NoError(t, err)
	var auth *reputation.Watched
	for i := range st.Targets {
		if st.Targets[i].Target == "toptierhighticket.club" {
			auth = &st.Targets[i]
		}
	}
	require.NotNil(t, auth)
	require.Equal(t, reputation.KindDomain, auth.Kind)
	require.Equal(t, reputation.OriginAuthDomain, auth.Origin)
	require.Len(t, auth.Listings, 1)
	require.Equal(t, "phish", auth.Listings[0].Reason)
	var listed int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = $2
		AND payload ->> 'target' = 'toptierhighticket.club'`, d.AccountID, events.TypeBlocklistListed).Scan(&listed))
	require.Equal(t, 1, listed)
}
