package reports_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// BenchmarkSources reads a busy domain's sources listing and guidance from
// its stored summary, the domain having seen 1,000 source IPs over 30 days
// (the baseline) and 10,000 (the listing sums its 5,000 busiest): what a
// read costs must not grow with them. Six IPs in ten have a PTR, as the
// history bench seeds them.
func BenchmarkSources(b *testing.B) {
	for _, ips := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("ips=%d", ips), func(b *testing.B) {
			ctx := context.Background()
			tx := dbtest.Tx(b)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			svc := &reports.Service{DB: tx, Now: func() time.Time { return now }}
			account, domain := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
			_, err := dbsqlc.New().AccountInsert(ctx, tx, dbsqlc.AccountInsertParams{ID: account, Email: account.String() + "@example.com", PasswordHash: "x"})
			require.NoError(b, err)
			_, err = dbsqlc.New().DomainInsert(ctx, tx, dbsqlc.DomainInsertParams{ID: domain, AccountID: account, Name: "busy.example.com", Tags: []string{}})
			require.NoError(b, err)
			_, err = tx.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant, forwarded, failing, dkim_selectors)
				SELECT $1, $2::date - (k % 30), '10.' || (k >> 16) || '.' || ((k >> 8) & 255) || '.' || (k & 255), 1 + k % 7, 1, 1, 1, 0, k % 2, '{s1}'
				FROM generate_series(0, $3::int * 6) AS k`, domain, now.AddDate(0, 0, -1), ips/6)
			require.NoError(b, err)
			_, err = tx.Exec(ctx, `INSERT INTO source_ptrs (ip, ptr, resolved_at)
				SELECT '10.' || (k >> 16) || '.' || ((k >> 8) & 255) || '.' || (k & 255), CASE k % 10 WHEN 0 THEN 'o' || k || '.ptr' || (k % 97) || '.sendgrid.net'
					WHEN 1 THEN 'a' || k || '-1.smtp-out.amazonses.com' WHEN 2 THEN 'mail-' || k || '.google.com'
					WHEN 3 THEN 'mail-' || k || '.outbound.protection.outlook.com' WHEN 4 THEN 'mail' || k || '.mcsv.net'
					WHEN 5 THEN 'mx' || k || '.busy.example.com' ELSE '' END, now()
				FROM generate_series(0, $1::int) AS k ON CONFLICT (ip) DO NOTHING`, ips)
			require.NoError(b, err)
			since := now.Add(-reports.ReadinessWindow)
			_, err = svc.Sources(ctx, tx, domain, since, now, reports.DefaultSourcesListed) // computes and stores
			require.NoError(b, err)
			b.ResetTimer()
			for b.Loop() {
				list, err := svc.Sources(ctx, tx, domain, since, now, reports.DefaultSourcesListed)
				if err != nil || len(list.Sources) == 0 {
					b.Fatal(err)
				}
				if _, err := svc.Guidance(ctx, tx, domain, "busy.example.com", reports.Policy{P: "none"}, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
