package domains

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestMain is shared by every test file of the package.
func TestMain(m *testing.M) { dbtest.Main(m) }

type storedEvent struct {
	Type, Severity string
	Domain         *string
	Tags           []string
	Payload        map[string]any
}

func eventsOf(t *testing.T, db dbutil.Executor, account uuid.UUID, eventType string) []storedEvent {
	t.Helper()
	rows, err := db.Query(context.Background(),
		"SELECT event_type, severity, domain, tags, payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY created_at, id", account, eventType)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		var p []byte
		require.NoError(t, rows.Scan(&e.Type, &e.Severity, &e.Domain, &e.Tags, &p))
		require.NoError(t, json.Unmarshal(p, &e.Payload))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestApplyDiscardsOlderChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, tx, "stale.test")
	now := time.Now()
	rs := func(spf string) *dnscheck.Results {
		return &dnscheck.Results{Domain: "stale.test", SPF: &dnscheck.SPFResult{Result: dnscheck.Result{Status: spf, Records: []string{}}}}
	}
	em := &events.Emitter{}

	out, err := Apply(ctx, tx, em, d.ID, d.DkimSelectors, now, rs(dnscheck.StatusPass), now)
	require.NoError(t, err)
	require.True(t, out.Applied)
	out, err = Apply(ctx, tx, em, d.ID, d.DkimSelectors, now.Add(-time.Second), rs(dnscheck.StatusNone), now)
	require.NoError(t, err)
	require.False(t, out.Applied, "a check that started before the stored one is discarded")
	require.Empty(t, out.Changes)
	require.Empty(t, eventsOf(t, tx, d.AccountID, events.TypeDNSRecordChanged))

	_, err = Apply(ctx, tx, em, uuid.Must(uuid.NewV7()), nil, now, rs(dnscheck.StatusPass), now)
	require.ErrorIs(t, err, ErrDomainGone)
}

// A check that ran with selectors the domain no longer has must not teach
// or change the DKIM baseline: the PATCH that changed them queued its own.
func TestApplyIgnoresDKIMOfReplacedSelectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, tx, "selectors.test")
	em := &events.Emitter{}
	dkim := func(status string, records ...string) *dnscheck.Results {
		return &dnscheck.Results{Domain: "selectors.test", DKIM: &dnscheck.DKIMResult{Result: dnscheck.Result{Status: status, Records: append([]string{}, records...)}}}
	}
	now := time.Now()
	_, err := Apply(ctx, tx, em, d.ID, []string{"s1"}, now, dkim(dnscheck.StatusPass, "v=DKIM1; p=old"), now)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "UPDATE domains SET dkim_selectors = '{s1}' WHERE id = $1", d.ID)
	require.NoError(t, err)
	_, err = Apply(ctx, tx, em, d.ID, []string{"s1"}, now.Add(time.Second), dkim(dnscheck.StatusPass, "v=DKIM1; p=old"), now)
	require.NoError(t, err)

	// The selectors change to s2 while a check with s1 is in flight; it
	// lands afterwards and finds no key at s1.
	_, err = tx.Exec(ctx, "UPDATE domains SET dkim_selectors = '{s2}' WHERE id = $1", d.ID)
	require.NoError(t, err)
	out, err := Apply(ctx, tx, em, d.ID, []string{"s1"}, now.Add(2*time.Second), dkim(dnscheck.StatusNone), now)
	require.NoError(t, err)
	require.True(t, out.Applied)
	require.Empty(t, out.Changes, "a stale DKIM answer is no change")
	require.Empty(t, eventsOf(t, tx, d.AccountID, events.TypeDNSRecordChanged))

	// A check with the current selectors is compared as usual.
	out, err = Apply(ctx, tx, em, d.ID, []string{"s2"}, now.Add(3*time.Second), dkim(dnscheck.StatusNone), now)
	require.NoError(t, err)
	require.Len(t, out.Changes, 1)
}

func TestScheduleChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	const n = 250
	for i := range n {
		testfactory.AccountDomain(t, pool, fmt.Sprintf("d%d.schedule.test", i))
	}
	interval := 15 * time.Minute
	now := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC)

	inserted, err := ScheduleChecks(ctx, pool, client, interval, now)
	require.NoError(t, err)
	require.Equal(t, n, inserted)

	t.Run("SpreadOverTheInterval", func(t *testing.T) {
		rows, err := pool.Query(ctx, "SELECT scheduled_at, queue FROM river_job WHERE kind = 'domain_check'")
		require.NoError(t, err)
		buckets := make([]int, 5)
		count := 0
		for rows.Next() {
			var at time.Time
			var queue string
			require.NoError(t, rows.Scan(&at, &queue))
			require.Equal(t, queues.DNS, queue)
			require.False(t, at.Before(now), "%s", at)
			require.True(t, at.Before(now.Add(interval)), "%s", at)
			buckets[int(at.Sub(now)*5/interval)]++
			count++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, n, count)
		for i, c := range buckets {
			require.Greater(t, c, n/5/3, "bucket %d of the interval holds only %d of %d checks", i, c, n)
		}
	})

	t.Run("OnePerDomainAndPeriod", func(t *testing.T) {
		// Runs later in the same period, and the next period's run, only
		// add checks for periods a domain has none in yet.
		again, err := ScheduleChecks(ctx, pool, client, interval, now)
		require.NoError(t, err)
		require.Zero(t, again, "the same run twice adds nothing")
		for _, at := range []time.Time{now.Add(time.Minute), now.Add(interval / 2), now.Add(interval), now.Add(interval + time.Minute)} {
			_, err := ScheduleChecks(ctx, pool, client, interval, at)
			require.NoError(t, err)
		}
		var total, distinct, maxPerSlot int
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT count(*), count(DISTINCT (args->>'domain_id', date_bin('15 minutes', scheduled_at, 'epoch'))), coalesce(max(c), 0)
			FROM river_job, LATERAL (SELECT count(*) AS c FROM river_job j2
				WHERE j2.kind = 'domain_check' AND j2.args = river_job.args
				AND date_bin('15 minutes', j2.scheduled_at, 'epoch') = date_bin('15 minutes', river_job.scheduled_at, 'epoch')) per_slot
			WHERE kind = 'domain_check'`).Scan(&total, &distinct, &maxPerSlot))
		require.Equal(t, 1, maxPerSlot, "never two checks of a domain in one period")
		require.Equal(t, total, distinct)
		require.GreaterOrEqual(t, total, 2*n, "every domain has its check in this period and the next")
		require.LessOrEqual(t, total, 3*n)
	})
}

func TestNextCheckAt(t *testing.T) {
	t.Parallel()
	interval := 15 * time.Minute
	id := uuid.Must(uuid.NewV7())
	off := CheckOffset(id, interval)
	require.Equal(t, off, CheckOffset(id, interval), "stable")
	require.Less(t, off, interval)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, now := range []time.Time{base, base.Add(off), base.Add(off + 1), base.Add(interval - 1)} {
		at := NextCheckAt(id, interval, now)
		require.False(t, at.Before(now))
		require.Less(t, at.Sub(now), interval)
		require.Equal(t, off, at.Sub(at.Truncate(interval)), "always at the domain's offset")
	}
}
