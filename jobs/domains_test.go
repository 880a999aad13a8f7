package jobs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

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

func historyLen(t *testing.T, db dbutil.Executor, domainID uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), "SELECT count(*) FROM domain_health_history WHERE domain_id = $1", domainID).Scan(&n))
	return n
}

// workerBundle is a River client working jobs on a database of its own,
// with DNS answered by a loopback server.
type workerBundle struct {
	pool      *pgxpool.Pool
	client    *river.Client[pgx.Tx]
	dns       *dnstest.Server
	resolver  *switchResolver
	completed <-chan *river.Event
	registry  *prometheus.Registry
}

// metric returns a counter's value, or a histogram's sample count, of the
// series of name with the given label pairs (0 when absent).
func (b *workerBundle) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := b.registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// switchResolver sends queries to the loopback DNS server chosen last, so
// a test can move a domain to different zone data (a real server each).
type switchResolver struct {
	cur atomic.Pointer[dnscheck.Client]
}

func (r *switchResolver) use(srv *dnstest.Server) {
	r.cur.Store(dnscheck.NewClient(srv.Addr(), 500*time.Millisecond))
}

func (r *switchResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return r.cur.Load().LookupTXT(ctx, name)
}

func (r *switchResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return r.cur.Load().LookupMX(ctx, name)
}

func (r *switchResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return r.cur.Load().LookupNetIP(ctx, network, host)
}

func (r *switchResolver) Query(ctx context.Context, name string, qtype uint16) (*dnscheck.Answer, error) {
	return r.cur.Load().Query(ctx, name, qtype)
}

func startDomainWorkers(t *testing.T, zone string) *workerBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	srv := dnstest.Start(t, zone)
	resolver := &switchResolver{}
	resolver.use(srv)
	deps := Deps{
		Pool:     pool,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Resolver: resolver,
		Registry: prometheus.NewRegistry(),
	}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.DNS}})
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
	return &workerBundle{pool: pool, client: client, dns: srv, resolver: resolver, completed: ch, registry: deps.Registry}
}

// run inserts args and waits until River reports the job finished.
func (b *workerBundle) run(t *testing.T, args river.JobArgs) {
	t.Helper()
	res, err := b.client.Insert(context.Background(), args, nil)
	require.NoError(t, err)
	for {
		select {
		case ev := <-b.completed:
			if ev.Job.ID != res.Job.ID {
				continue
			}
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "job errors: %v", ev.Job.Errors)
			return
		case <-time.After(30 * time.Second):
			t.Fatalf("job %d (%s) did not finish", res.Job.ID, args.Kind())
		}
	}
}

func TestDomainCheckJob(t *testing.T) {
	t.Parallel()
	const name = "job-check.test"
	b := startDomainWorkers(t, testfactory.GoodZone(name))
	d := testfactory.AccountDomain(t, b.pool, name, "prod")
	q := dbsqlc.New()
	ctx := context.Background()

	b.run(t, domains.CheckArgs{DomainID: d.ID})
	row, err := q.DomainGetByID(ctx, b.pool, d.ID)
	require.NoError(t, err)
	require.NotNil(t, row.CheckedAt)
	require.NotNil(t, row.Score)
	require.EqualValues(t, 80, *row.Score)
	require.Equal(t, 1, historyLen(t, b.pool, d.ID))
	require.Empty(t, eventsOf(t, b.pool, d.AccountID, events.TypeDNSRecordChanged), "the first check is a baseline")
	require.Equal(t, 1.0, b.metric(t, "mailwatch_domain_check_results_total", "check", "spf", "status", "pass"))
	require.Equal(t, 1.0, b.metric(t, "mailwatch_domain_check_duration_seconds"), "one domain checked")

	t.Run("UnchangedEmitsNothing", func(t *testing.T) {
		b.run(t, domains.CheckArgs{DomainID: d.ID})
		require.Empty(t, eventsOf(t, b.pool, d.AccountID, events.TypeDNSRecordChanged))
		require.Equal(t, 2, historyLen(t, b.pool, d.ID), "every computation is recorded")
	})

	t.Run("TemperrorNeverEmits", func(t *testing.T) {
		b.dns.ServFail(name + ".")
		b.run(t, domains.CheckArgs{DomainID: d.ID})
		row, err := q.DomainGetByID(ctx, b.pool, d.ID)
		require.NoError(t, err)
		var status map[string]string
		require.NoError(t, json.Unmarshal(row.CheckStatus, &status))
		require.Equal(t, dnscheck.StatusTemperror, status["spf"])
		require.Equal(t, 1.0, b.metric(t, "mailwatch_domain_check_results_total", "check", "spf", "status", "temperror"))
		require.EqualValues(t, 80, *row.Score)
		require.Empty(t, eventsOf(t, b.pool, d.AccountID, events.TypeDNSRecordChanged))
		require.Empty(t, eventsOf(t, b.pool, d.AccountID, events.TypeHealthScoreChanged))
	})

	t.Run("SPFThatPassedNowMissingIsCritical", func(t *testing.T) {
		// The first server keeps failing; the resolver now asks a second
		// one where the SPF record is gone.
		fresh := dnstest.Start(t, testfactory.GoodZone(name))
		fresh.Remove(name+".", dns.TypeTXT)
		b.resolver.use(fresh)
		b.run(t, domains.CheckArgs{DomainID: d.ID})

		evs := eventsOf(t, b.pool, d.AccountID, events.TypeDNSRecordChanged)
		require.Len(t, evs, 1)
		require.Equal(t, 1.0, b.metric(t, "mailwatch_domain_check_changes_total"))
		require.Equal(t, "critical", evs[0].Severity)
		require.Equal(t, name, *evs[0].Domain)
		require.Equal(t, []string{"prod"}, evs[0].Tags)
		require.Equal(t, "spf", evs[0].Payload["check"])
		require.Equal(t, map[string]any{"status": "pass", "records": []any{"v=spf1 mx ip4:192.0.2.0/24 -all"}}, evs[0].Payload["before"],
			"compared with the last known answer, not the temperror in between")
		require.Equal(t, map[string]any{"status": "none", "records": []any{}}, evs[0].Payload["after"])

		hs := eventsOf(t, b.pool, d.AccountID, events.TypeHealthScoreChanged)
		require.Len(t, hs, 1)
		require.Equal(t, "critical", hs[0].Severity)
		require.EqualValues(t, 80, hs[0].Payload["previous_score"])
		require.EqualValues(t, 60, hs[0].Payload["score"])
		require.EqualValues(t, -20, hs[0].Payload["delta"])
		require.NotEmpty(t, hs[0].Payload["reasons"])
	})

	t.Run("DeletedDomainCompletes", func(t *testing.T) {
		gone := testfactory.AccountDomain(t, b.pool, "gone.job-check.test")
		_, err := b.pool.Exec(ctx, "DELETE FROM domains WHERE id = $1", gone.ID)
		require.NoError(t, err)
		b.run(t, domains.CheckArgs{DomainID: gone.ID})
		b.run(t, domains.HealthArgs{DomainID: gone.ID})
	})
}

func TestDomainHealthJob(t *testing.T) {
	t.Parallel()
	const name = "job-health.test"
	b := startDomainWorkers(t, testfactory.GoodZone(name))
	d := testfactory.AccountDomain(t, b.pool, name)

	b.run(t, domains.HealthArgs{DomainID: d.ID})
	require.Zero(t, historyLen(t, b.pool, d.ID), "a domain never checked has nothing to score")

	b.run(t, domains.CheckArgs{DomainID: d.ID})
	require.Equal(t, 1, historyLen(t, b.pool, d.ID))
	b.run(t, domains.HealthArgs{DomainID: d.ID})
	require.Equal(t, 2, historyLen(t, b.pool, d.ID))
	require.Empty(t, eventsOf(t, b.pool, d.AccountID, events.TypeHealthScoreChanged), "same score, no event")
}

func TestDomainPeriodicJobsUseTheConfiguredInterval(t *testing.T) {
	t.Parallel()
	require.Equal(t, domains.DefaultCheckInterval, Deps{}.dnsCheckInterval())
	require.Equal(t, time.Minute, Deps{Settings: Settings{DNSCheckInterval: time.Minute}}.dnsCheckInterval())
	require.Len(t, domainPeriodicJobs(Deps{}), 2)
}

// The domains package's args go to queues the workers work.
func TestDomainArgsQueuesAreWorked(t *testing.T) {
	t.Parallel()
	for _, args := range []interface {
		river.JobArgs
		river.JobArgsWithInsertOpts
	}{
		domains.CheckArgs{}, domains.HealthArgs{}, domains.ScheduleArgs{}, domains.HealthPruneArgs{},
		domains.RecheckAllArgs{}, domains.FixApplyArgs{}, domains.MXVerifyArgs{}, domains.MXScheduleArgs{},
	} {
		require.Contains(t, queues.All, args.InsertOpts().Queue, args.Kind())
	}
}
