package domains

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestDNSFixProposesNP: once the subdomain lookups found that mail claims
// a subdomain that does not exist, the DMARC recommendation of a domain at
// p=none adds np=reject, naming it; before, it has nothing to change.
func TestDNSFixProposesNP(t *testing.T) {
	t.Parallel()
	const name = "np.test"
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, strings.Replace(testfactory.GoodZone(name), "p=reject", "p=none", 1))
	resolver := dnscheck.NewClient(srv.Addr(), time.Second)
	d := testfactory.AccountDomain(t, pool, name)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rs := CheckDomain(ctx, resolver, nil, pool, nil, d, now)
	out, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (*Outcome, error) {
		return Apply(ctx, tx, &events.Emitter{}, d.ID, d.DkimSelectors, now, rs, now)
	})
	require.NoError(t, err)
	fx := &FixDeps{Inputs: ReportInputs(nil, "", nil)}
	dmarcRecs := func() (proposed []string, why string) {
		t.Helper()
		require.NoError(t, RecomputeFixes(ctx, pool, resolver, fx, out.Domain, now))
		err := pool.QueryRow(ctx, "SELECT proposed, why FROM dns_recommendations WHERE domain_id = $1 AND key = 'dmarc'", d.ID).Scan(&proposed, &why)
		if dbutil.IsNotFound(err) {
			return nil, ""
		}
		require.NoError(t, err)
		return proposed, why
	}
	got, _ := dmarcRecs()
	require.Empty(t, got, "no subdomain known not to exist")

	_, err = pool.Exec(ctx, `INSERT INTO dmarc_subdomains (domain_id, name, first_seen, last_seen, first_messages, first_passing, dns_exists, dns_checked_at)
		VALUES ($1, 'billing.np.test', '2025-12-30', '2025-12-31', 30, 0, false, $2)`, d.ID, now)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO dmarc_header_from_days (domain_id, day, header_from, messages, passing)
		VALUES ($1, '2025-12-31', 'billing.np.test', 30, 0)`, d.ID)
	require.NoError(t, err)
	got, why := dmarcRecs()
	require.Len(t, got, 1)
	require.Contains(t, got[0], "np=reject")
	require.Contains(t, why, "billing.np.test: 30 messages, 0% passing DMARC")
}
