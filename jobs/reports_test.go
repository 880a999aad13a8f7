package jobs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestHealthCappedByDMARCPassRate: once aggregate reports say half of the
// domain's mail fails DMARC, the health score is capped at 50 whatever its
// DNS posture.
func TestHealthCappedByDMARCPassRate(t *testing.T) {
	t.Parallel()
	const name = "job-dmarc-cap.test"
	b := startDomainWorkers(t, testfactory.GoodZone(name))
	d := testfactory.AccountDomain(t, b.pool, name)
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
