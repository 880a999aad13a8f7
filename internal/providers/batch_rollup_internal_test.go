package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestConcurrentBatchesOfOneAccountDoNotDeadlock normalises batches of one
// account's payloads in concurrent transactions, their events in every
// order over the same hour, as the provider_payload jobs of a busy account
// do. Each batch stores its events with one statement, so the rollup
// triggers take the shared counters of their slot in one ordered sweep: the
// transactions of one slot wait for each other and none fails with a
// deadlock (events stored one statement at a time lock the counters in
// arrival order and deadlock). The account's count is the sum over slots.
func TestConcurrentBatchesOfOneAccountDoNotDeadlock(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	account := testfactory.Account(t, pool)
	domain := testfactory.Domain(t, pool, account, "busy.example")
	provider := uuid.Must(uuid.NewV7())
	_, err := pool.Exec(ctx, `INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'sendgrid', 'sg', '\x00', 'k')`, provider, account)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO sending_provider_links (provider_id, domain_id) VALUES ($1, $2)`, provider, domain.ID)
	require.NoError(t, err)

	hour := time.Now().Truncate(time.Hour).Unix()
	types := []string{"processed", "delivered", "deferred", "bounce", "dropped", "spamreport", "unsubscribe"}
	payload := func(r *rand.Rand, worker, round, n int) (uuid.UUID, error) {
		evs := make([]map[string]any, 5)
		for i := range evs {
			evs[i] = map[string]any{"email": fmt.Sprintf("r%d@rcpt.example", r.IntN(1000)), "event": types[r.IntN(len(types))],
				"timestamp": hour + r.Int64N(3600), "sg_event_id": fmt.Sprintf("w%d-%d-%d-%d", worker, round, n, i)}
		}
		body, _ := json.Marshal(evs)
		id := uuid.Must(uuid.NewV7())
		_, err := pool.Exec(ctx, `INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body)
			VALUES ($1, $2, $3, $4, '\x00', $5)`, id, provider, account, id.String(), body)
		return id, err
	}
	const workers, rounds = 6, 12
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 26))
			for round := range rounds {
				ids := make([]uuid.UUID, 3)
				for n := range ids {
					id, err := payload(r, w, round, n)
					if err != nil {
						errs <- err
						return
					}
					ids[n] = id
				}
				errs <- dbutil.WithTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
					_, err := processBatch(ctx, tx, ids, time.Now())
					return err
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var raw, counted int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_events WHERE account_id = $1),
		(SELECT coalesce(sum(n), 0) FROM message_event_account_hourly WHERE account_id = $1)`, account).Scan(&raw, &counted))
	require.EqualValues(t, workers*rounds*3*5, raw)
	require.Equal(t, raw, counted)
}
