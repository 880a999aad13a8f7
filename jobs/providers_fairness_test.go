package jobs

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// gateMax records the most provider_payload jobs of each account the
// worker's gate ever admitted at once.
type gateMax struct {
	mu  sync.Mutex
	max map[uuid.UUID]int
}

func (g *gateMax) observe(account uuid.UUID, running int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.max[account] = max(g.max[account], running)
}

func (g *gateMax) of(account uuid.UUID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max[account]
}

// One account's flood of provider payload jobs takes at most
// PROVIDER_ACCOUNT_CONCURRENCY workers: with the flood's admitted jobs
// held inside normalisation (a trigger makes its events wait on a lock the
// test holds), another account's payload queued after the flood is
// normalised while every job of the flood is still unfinished. The jobs
// over the bound wait for their turn without using an attempt, and the
// flood never has more than its bound running.
func TestProviderPayloadFairnessPerAccount(t *testing.T) {
	t.Parallel()
	const workers, bound, flood = 3, 2, 40
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	seen := &gateMax{max: map[uuid.UUID]int{}}
	reg := prometheus.NewRegistry()
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), observeProviderGate: seen.observe,
		Settings: Settings{ProviderAccountConcurrency: bound}, Registry: reg}
	client, err := NewClient(deps, Options{Concurrency: workers, Queues: []string{queues.Default}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancel)

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	tenant := func(name string) (account, provider uuid.UUID) {
		account, provider = uuid.New(), uuid.New()
		exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, account, name+"@fairness.example")
		exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'mailgun', 'mg', '\x00', 'k')`, provider, account)
		return account, provider
	}
	bounce := corpus.Read(t, "esp/mailgun-permanent_failure.json")
	job := func(account, provider uuid.UUID, key string) river.InsertManyParams {
		id := uuid.Must(uuid.NewV7())
		exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, $4, '\x00', $5)`,
			id, provider, account, key, bounce)
		return river.InsertManyParams{Args: providers.PayloadArgs{AccountID: account, PayloadIDs: []uuid.UUID{id}}}
	}
	loud, loudProvider := tenant("flood")
	quiet, quietProvider := tenant("quiet")

	// The flood's events wait on an advisory lock the test holds, so its
	// admitted jobs stay running, holding their workers, until released.
	const lockKey = 7_402_113
	exec(`CREATE FUNCTION hold_flood() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.account_id = '` + loud.String() + `' THEN PERFORM pg_advisory_xact_lock_shared(` + strconv.Itoa(lockKey) + `); END IF; RETURN NEW; END $$`)
	exec(`CREATE TRIGGER hold_flood BEFORE INSERT ON message_events FOR EACH ROW EXECUTE FUNCTION hold_flood()`)
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(lockKey))
	require.NoError(t, err)
	unlock := sync.OnceFunc(func() {
		_, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(lockKey))
		require.NoError(t, err)
		holder.Release()
	})
	t.Cleanup(unlock)
	held := func() int {
		// Backends of this database waiting for a lock: the flood's jobs,
		// on the test's lock or on one another's rows.
		return count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}

	floodJobs := make([]river.InsertManyParams, flood)
	for i := range floodJobs {
		floodJobs[i] = job(loud, loudProvider, "token:flood-"+uuid.NewString())
	}
	_, err = client.InsertMany(ctx, floodJobs)
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		unlock()
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	require.Eventually(t, func() bool { return held() >= bound }, time.Minute, 10*time.Millisecond, "the flood's jobs never reached its events")

	other, err := client.Insert(ctx, job(quiet, quietProvider, "token:quiet").Args, nil)
	require.NoError(t, err)
	unfinished := func() int {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND finalized_at IS NULL AND args->>'account_id' = $1`, loud.String())
	}
	bounded := time.After(time.Minute)
	completed := 0
	for waiting := true; waiting; {
		select {
		case ev := <-done:
			if ev.Job.ID == other.Job.ID {
				require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
				waiting = false
				continue
			}
			completed++
		case <-bounded:
			t.Fatalf("the other tenant's payload waited behind the flood: %d of the flood's jobs held, %d unfinished", held(), unfinished())
		}
	}
	require.Zero(t, completed, "a job of the flood ended before the other tenant's payload was normalised")
	require.Equal(t, 1, count(`SELECT count(*) FROM message_events WHERE account_id = $1`, quiet))
	require.Equal(t, flood, unfinished(), "every job of the flood is still waiting")
	require.Equal(t, bound, held(), "the flood's jobs running are its bound")
	require.Equal(t, bound, seen.of(loud))

	unlock()
	drained := time.After(2 * time.Minute)
	for completed < flood {
		select {
		case ev := <-done:
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
			completed++
		case <-drained:
			t.Fatalf("the flood never drained: %d of %d done", completed, flood)
		}
	}
	require.Equal(t, flood, count(`SELECT count(*) FROM provider_payloads WHERE account_id = $1 AND processed_at IS NOT NULL AND error IS NULL`, loud))
	require.Equal(t, bound, seen.of(loud), "the flood never had more than its bound running")
	require.Equal(t, flood, count(`SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND args->>'account_id' = $1 AND attempt = 1`, loud),
		"waiting for a turn uses no attempt")
	require.Positive(t, count(`SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND args->>'account_id' = $1 AND (metadata->>$2)::int > 0`,
		loud, providers.MetadataFairWaits), "the jobs over the bound waited for their turn")
	waits, err := testutil.GatherAndCount(reg, "mailwatch_provider_payload_waits_total")
	require.NoError(t, err)
	require.Equal(t, 1, waits, "the waits are exported")
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "mailwatch_provider_payload_waits_total" {
			require.Positive(t, f.GetMetric()[0].GetCounter().GetValue(), "the waits are counted")
		}
	}
}
