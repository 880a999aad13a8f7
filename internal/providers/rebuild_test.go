package providers_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/jobs"
)

// TestMessageRollupsRebuild corrupts rollup rows of two accounts (a wrong
// count, a missing row, a row no raw row backs, in both hourly tables, and
// daily rows that differ from their hours, a day without hours included;
// the hourly corruption reaches the daily rows through their triggers and
// is undone the same way), rebuilds one account: its rollups are right
// again, folded into slot 0, and the other's are left alone; the counts
// are of keys corrected, whatever the slots folded. The maintenance job
// then rebuilds every account, and a rebuild of right rollups corrects
// nothing.
func TestMessageRollupsRebuild(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	w := newRollupWorld(t, pool, 7, 2)
	for _, c := range dbtest.SlotConns(t, pool, 3) {
		w.writers = append(w.writers, c)
	}
	w.stream(t, 30)
	requireRollupsEqualRecount(t, pool)
	a, b := w.providers[0].account, w.providers[3].account

	corrupt := func(account uuid.UUID) {
		t.Helper()
		for _, sql := range []string{
			`UPDATE message_event_domain_hourly SET n = n + 5 WHERE ctid = (SELECT ctid FROM message_event_domain_hourly WHERE account_id = $1 ORDER BY hour LIMIT 1)`,
			`DELETE FROM message_event_domain_hourly WHERE ctid = (SELECT ctid FROM message_event_domain_hourly WHERE account_id = $1 ORDER BY hour DESC LIMIT 1)`,
			`INSERT INTO message_event_domain_hourly (account_id, domain, hour, domain_id, provider_id, provider_kind, event_type, bounce_class, n)
			 VALUES ($1, 'ghost.example', '2020-01-01T00:00:00Z', NULL, gen_random_uuid(), 'ses', 'sent', NULL, 3)`,
			`UPDATE message_event_account_hourly SET n = n - 1 WHERE ctid = (SELECT ctid FROM message_event_account_hourly WHERE account_id = $1 LIMIT 1)`,
			`INSERT INTO message_event_account_hourly (account_id, hour, provider_kind, event_type, bounce_class, n)
			 VALUES ($1, '2020-01-01T00:00:00Z', 'ses', 'bounced', 'hard', 2)`,
			// Drifts of the daily rows that no hourly row explains.
			`UPDATE message_event_account_daily SET n = n + 7 WHERE ctid = (SELECT ctid FROM message_event_account_daily WHERE account_id = $1 AND day > '2026-01-01' LIMIT 1)`,
			`DELETE FROM message_event_domain_daily WHERE ctid = (SELECT ctid FROM message_event_domain_daily WHERE account_id = $1 AND day > '2026-01-01' ORDER BY day DESC LIMIT 1)`,
			`INSERT INTO message_event_account_daily (account_id, day, provider_kind, event_type, bounce_class, n)
			 VALUES ($1, '2019-06-01', 'ses', 'sent', NULL, 4)`,
		} {
			tag, err := pool.Exec(ctx, sql, account)
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected(), sql)
		}
	}
	corrupt(a)
	corrupt(b)

	r, err := providers.RebuildMessageRollups(ctx, pool, a)
	require.NoError(t, err)
	// The account rollup is recounted from the domain rollup rebuilt first,
	// so each table's own corruption is what it corrects.
	require.Equal(t, providers.Rebuilt{Accounts: 1, DomainWritten: 2, DomainDeleted: 1, AccountWritten: 1, AccountDeleted: 1,
		DailyWritten: 2, DailyDeleted: 1}, r)
	var stillWrong int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_event_domain_hourly WHERE account_id = $1 AND domain = 'ghost.example'`, b).Scan(&stillWrong))
	require.Equal(t, 1, stillWrong, "another account's rollups are not touched")
	var striped int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_event_domain_hourly WHERE account_id = $1 AND slot <> 0)
		+ (SELECT count(*) FROM message_event_account_hourly WHERE account_id = $1 AND slot <> 0)
		+ (SELECT count(*) FROM message_event_domain_daily WHERE account_id = $1 AND slot <> 0)
		+ (SELECT count(*) FROM message_event_account_daily WHERE account_id = $1 AND slot <> 0)`, a).Scan(&striped))
	require.Zero(t, striped, "the rebuild folds the slots into slot 0")

	worker := jobs.NewMessageRollupRebuildWorker(jobs.Deps{Pool: pool})
	require.NoError(t, worker.Work(ctx, &river.Job[providers.RollupRebuildArgs]{JobRow: &rivertype.JobRow{}}))
	requireRollupsEqualRecount(t, pool)

	r, err = providers.RebuildAllMessageRollups(ctx, pool)
	require.NoError(t, err)
	require.False(t, r.Corrected(), "right rollups: nothing written (%+v)", r)
	require.GreaterOrEqual(t, r.Accounts, 2)
}

// TestMessageRollupsRebuildWaitsForWriters holds a normalisation
// transaction open with an event stored, of a key the rebuild rewrites, and
// starts a rebuild of the account: the rebuild waits for the writer (the
// triggers' shared account lock), so once both committed the event is
// counted. Then the other way round: a writer that comes while a rebuild
// is open waits for it and adds its event on top.
func TestMessageRollupsRebuildWaitsForWriters(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	w := newRollupWorld(t, pool, 11, 1)
	p := w.providers[0] // SendGrid, linked to one domain
	w.stream(t, 10)
	account := p.account

	waiting := func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}

	// A writer in flight when the rebuild starts.
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = providers.ProcessPayloads(ctx, writer, []uuid.UUID{w.payload(t, p)}, time.Now())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := providers.RebuildMessageRollups(ctx, pool, account)
		done <- err
	}()
	require.Eventually(t, waiting, time.Minute, 5*time.Millisecond, "the rebuild waits for the writer")
	require.NoError(t, writer.Commit(ctx))
	require.NoError(t, <-done)
	requireRollupsEqualRecount(t, pool)

	// A writer that comes during a rebuild.
	rebuild, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = providers.RebuildMessageRollups(ctx, rebuild, account)
	require.NoError(t, err)
	id := w.payload(t, p)
	go func() {
		done <- dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
			_, err := providers.ProcessPayloads(ctx, tx, []uuid.UUID{id}, time.Now())
			return err
		})
	}()
	require.Eventually(t, waiting, time.Minute, 5*time.Millisecond, "the writer waits for the rebuild")
	require.NoError(t, rebuild.Commit(ctx))
	require.NoError(t, <-done)
	requireRollupsEqualRecount(t, pool)
}
