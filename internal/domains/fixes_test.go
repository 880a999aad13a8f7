package domains

import (
	"bytes"
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
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestDNSFixInputsFromReports: the DMARC recommendation of a domain at
// p=none merges the domain's signed rua address (its other destination
// stays) and proposes p=quarantine only once the aggregate reports say it
// is safe, as GET .../dmarc/guidance does; TLS-RPT points at the signed
// TLS-RPT address.
func TestDNSFixInputsFromReports(t *testing.T) {
	t.Parallel()
	const name = "inputs.test"
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	zone := strings.Replace(testfactory.GoodZone(name), "p=reject", "p=none", 1)
	zone = strings.Replace(zone, "_smtp._tls.", "_unused._tls.", 1) // no TLS-RPT record
	srv := dnstest.Start(t, zone)
	resolver := dnscheck.NewClient(srv.Addr(), time.Second)
	d := testfactory.AccountDomain(t, pool, name)
	now := time.Now()
	rs := CheckDomain(ctx, resolver, nil, pool, nil, d, now)
	out, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (*Outcome, error) {
		return Apply(ctx, tx, &events.Emitter{}, d.ID, d.DkimSelectors, now, rs, now)
	})
	require.NoError(t, err)

	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	const inbound = "inbound.mailwatch.test"
	fx := &FixDeps{Inputs: ReportInputs(keyring, inbound, nil)}
	addrs, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return (&reports.Service{DB: pool, Signer: &reports.Signer{Keyring: keyring, Domain: inbound}}).Sign(ctx, tx, d.AccountID, d.ID, d.Name)
	})
	require.NoError(t, err)
	var dmarcAddr, tlsAddr string
	for _, a := range addrs {
		if a.Kind == reports.KindDMARC {
			dmarcAddr = a.Address
		} else {
			tlsAddr = a.Address
		}
	}
	require.NotEmpty(t, dmarcAddr)
	require.NotEmpty(t, tlsAddr)

	proposed := func() (string, string) {
		t.Helper()
		require.NoError(t, RecomputeFixes(ctx, pool, resolver, fx, out.Domain, now))
		var p []string
		var why string
		require.NoError(t, pool.QueryRow(ctx, "SELECT proposed, why FROM dns_recommendations WHERE domain_id = $1 AND key = 'dmarc'", d.ID).Scan(&p, &why))
		require.Len(t, p, 1)
		return p[0], why
	}

	// Without the inputs, the record already names a destination and has
	// nothing to change: no recommendation at all.
	require.NoError(t, RecomputeFixes(ctx, pool, resolver, &FixDeps{}, out.Domain, now))
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM dns_recommendations WHERE domain_id = $1 AND key = 'dmarc'", d.ID).Scan(&n))
	require.Zero(t, n)

	// Too little reported volume to judge: rua merged, policy unchanged.
	_, err = pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing)
		VALUES ($1, current_date, '192.0.2.1', 50, 50, 50, 50, 0, 0)`, d.ID)
	require.NoError(t, err)
	got, why := proposed()
	require.Equal(t, "v=DMARC1; p=none; rua=mailto:dmarc@"+name+",mailto:"+dmarcAddr, got)
	require.NotContains(t, why, "p=quarantine")

	// Enough volume, all of it passing: the next step is proposed.
	_, err = pool.Exec(ctx, `UPDATE dmarc_source_days SET messages = 1000, dkim_aligned = 1000, spf_aligned = 1000, compliant = 1000 WHERE domain_id = $1`, d.ID)
	require.NoError(t, err)
	got, why = proposed()
	require.Equal(t, "v=DMARC1; p=quarantine; rua=mailto:dmarc@"+name+",mailto:"+dmarcAddr, got)
	require.Contains(t, why, "move to p=quarantine: 100.0% of 1000 legitimate messages")
	require.NotContains(t, got, "pct")

	var tlsProposed []string
	require.NoError(t, pool.QueryRow(ctx, "SELECT proposed FROM dns_recommendations WHERE domain_id = $1 AND key = 'tls_rpt'", d.ID).Scan(&tlsProposed))
	require.Equal(t, []string{"v=TLSRPTv1; rua=mailto:" + tlsAddr}, tlsProposed)
}

// TestDomainCheckAsksForTheSignedAddress: once a domain's reporting
// addresses are minted, its DMARC check is given the DMARC address to look
// for in rua.
func TestDomainCheckAsksForTheSignedAddress(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	d := testfactory.AccountDomain(t, pool, "job-signed.test")
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{5}, 32))
	require.NoError(t, err)
	svc := &reports.Service{DB: pool, Signer: &reports.Signer{Keyring: keyring, Domain: "inbound.mailwatch.test"}}
	require.Empty(t, reportAddress(ctx, pool, svc.Signer, d.ID), "nothing minted yet")

	addrs, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) ([]reports.Address, error) {
		return svc.Sign(ctx, tx, d.AccountID, d.ID, d.Name)
	})
	require.NoError(t, err)
	got := reportAddress(ctx, pool, svc.Signer, d.ID)
	require.True(t, strings.HasPrefix(got, "dmarc+"))
	require.Contains(t, []string{addrs[0].Address, addrs[1].Address}, got)
}
