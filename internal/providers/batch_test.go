package providers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/jobs"
)

// TestIngesterBatches stores payloads through the Ingester on a real pool:
// a lone request is written at once in a transaction of its own; a burst of
// concurrent requests shares transactions (one River job per batch) and
// every request is answered, stored once and named by exactly one job; a
// replay in a burst is acknowledged as a duplicate; a payload of a deleted
// provider is not stored.
func TestIngesterBatches(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	g := &providers.Ingester{
		DB: pool, River: client,
		BatchJob: func(account uuid.UUID, ids []uuid.UUID) river.JobArgs {
			return providers.PayloadArgs{AccountID: account, PayloadIDs: ids}
		},
	}
	account := uuid.New()
	_, err = pool.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'ingester@example.com', 'x')`, account)
	require.NoError(t, err)
	newProvider := func() *dbsqlc.SendingProvider {
		p := &dbsqlc.SendingProvider{ID: uuid.New(), AccountID: account}
		_, err := pool.Exec(ctx, `INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
			VALUES ($1, $2, 'sendgrid', $3, '\x00', 'k')`, p.ID, account, p.ID.String())
		require.NoError(t, err)
		return p
	}
	prov := newProvider()
	store := func(p *dbsqlc.SendingProvider, key string) (providers.Stored, error) {
		return g.Store(ctx, providers.Ingest{Provider: p, Verified: providers.Verified{ReplayKey: key},
			Body: []byte(`[{"event":"processed","key":"` + key + `"}]`), Now: time.Now()})
	}
	jobPayloads := func() map[uuid.UUID]int {
		rows, err := pool.Query(ctx, `SELECT args FROM river_job WHERE kind = 'provider_payload'`)
		require.NoError(t, err)
		all, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		require.NoError(t, err)
		seen := map[uuid.UUID]int{}
		for _, raw := range all {
			var a providers.PayloadArgs
			require.NoError(t, json.Unmarshal(raw, &a))
			for _, id := range a.PayloadIDs {
				seen[id]++
			}
		}
		return seen
	}

	first, err := store(prov, "lone")
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	require.Equal(t, 1, g.Batches(), "a lone request is written at once")
	require.Equal(t, map[uuid.UUID]int{first.PayloadID: 1}, jobPayloads())

	const burst = 300
	start := make(chan struct{})
	results := make([]providers.Stored, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			key := fmt.Sprintf("burst-%d", i)
			if i == burst-1 {
				key = "lone" // a replay of the first request
			}
			results[i], errs[i] = store(prov, key)
		}()
	}
	close(start)
	wg.Wait()
	ids := map[uuid.UUID]bool{first.PayloadID: true}
	for i := range burst {
		require.NoError(t, errs[i], "request %d", i)
		if i == burst-1 {
			require.Equal(t, providers.Stored{PayloadID: first.PayloadID, Duplicate: true}, results[i])
			continue
		}
		require.False(t, results[i].Duplicate, "request %d", i)
		require.False(t, ids[results[i].PayloadID], "request %d got another's id", i)
		ids[results[i].PayloadID] = true
	}
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE provider_id = $1`, prov.ID).Scan(&stored))
	require.Equal(t, burst, stored, "the first request and the burst's 299 new ones")
	seen := jobPayloads()
	require.Len(t, seen, burst)
	for id := range ids {
		require.Equal(t, 1, seen[id], "payload %s is named by exactly one job", id)
	}
	batches := g.Batches() - 1
	require.LessOrEqual(t, batches, burst/4, "a burst of %d requests shares transactions (%d)", burst, batches)
	t.Logf("%d concurrent requests written in %d transactions", burst, batches)

	// A provider deleted after its request was verified: nothing stored.
	gone := newProvider()
	_, err = pool.Exec(ctx, `DELETE FROM sending_providers WHERE id = $1`, gone.ID)
	require.NoError(t, err)
	_, err = store(gone, "late")
	require.ErrorIs(t, err, providers.ErrNotFound)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE provider_id = $1`, gone.ID).Scan(&stored))
	require.Zero(t, stored)
}
