package jobs

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// TestHealthCappedByDMARCPassRate: once aggregate reports say half of the
// domain's mail fails DMARC, the health score is capped at 50 whatever its
// DNS posture.
func TestHealthCappedByDMARCPassRate(t *testing.T) {
	t.Parallel()
	const name = "job-dmarc-cap.test"
	b := startDomainWorkers(t, testDomainZone(name))
	d := insertTestDomain(t, b.pool, name)
	ctx := context.Background()

	b.run(t, domains.CheckArgs{DomainID: d.ID})
	var before int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT score FROM domains WHERE id = $1", d.ID).Scan(&before))
	require.Greater(t, before, 50)

	_, err := b.pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing)
		VALUES ($1, current_date, '192.0.2.1', 1000, 500, 500, 500, 0, 500)`, d.ID)
	require.NoError(t, err)
	b.run(t, domains.HealthArgs{DomainID: d.ID})
	var after int
	var applied string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT score, health->'applied'->>'name' FROM domains WHERE id = $1", d.ID).Scan(&after, &applied))
	require.Equal(t, 50, after)
	require.Equal(t, "dmarc_pass_rate", applied)
}

// TestDomainCheckAsksForTheSignedAddress: once a domain's reporting
// addresses are minted, its DMARC check is given the DMARC address to look
// for in rua.
func TestDomainCheckAsksForTheSignedAddress(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	d := insertTestDomain(t, pool, "job-signed.test")
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{5}, 32))
	require.NoError(t, err)
	deps := Deps{Pool: pool, Keyring: keyring, Config: &config.Config{InboundDomain: "inbound.mailwatch.test"}}
	require.Empty(t, reportAddress(ctx, pool, ReportService(deps).Signer, d.ID), "nothing minted yet")

	addrs, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return ReportService(deps).Sign(ctx, tx, d.AccountID, d.ID, d.Name)
	})
	require.NoError(t, err)
	got := reportAddress(ctx, pool, ReportService(deps).Signer, d.ID)
	require.True(t, strings.HasPrefix(got, "dmarc+"))
	require.Contains(t, []string{addrs[0].Address, addrs[1].Address}, got)
}
