package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestSubdomainLookupJob: the dmarc_subdomain_lookup job, worked on the DNS
// queue, stores whether each subdomain mail claimed exists.
func TestSubdomainLookupJob(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, "$TTL 300\nmail.sub-job.test. A 192.0.2.1\n")
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Resolver: dnscheck.NewClient(srv.Addr(), time.Second)}
	client, err := NewClient(deps, Options{Concurrency: 2, Queues: []string{queues.DNS}})
	require.NoError(t, err)
	ch, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	b := &workerBundle{pool: pool, client: client, completed: ch}

	d := testfactory.AccountDomain(t, pool, "sub-job.test")
	_, err = pool.Exec(ctx, `INSERT INTO dmarc_subdomains (domain_id, name, first_seen, last_seen, first_messages, first_passing)
		VALUES ($1, 'mail.sub-job.test', '2026-01-01', '2026-01-01', 5, 5), ($1, 'ghost.sub-job.test', '2026-01-01', '2026-01-01', 9, 0)`, d.ID)
	require.NoError(t, err)
	_, err = client.Insert(ctx, reports.SubdomainLookupArgs{DomainID: d.ID, Domain: d.Name}, nil)
	require.NoError(t, err)
	b.waitFor(t, 1, "SELECT count(*) FROM river_job WHERE kind = 'dmarc_subdomain_lookup' AND state = 'completed'")
	var exists, ghost bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		bool_or(dns_exists) FILTER (WHERE name = 'mail.sub-job.test'), bool_or(dns_exists) FILTER (WHERE name = 'ghost.sub-job.test')
		FROM dmarc_subdomains WHERE domain_id = $1`, d.ID).Scan(&exists, &ghost))
	require.True(t, exists)
	require.False(t, ghost, "NXDOMAIN")
}
