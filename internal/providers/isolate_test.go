package providers

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// TestProcessPayloadsGivesUp normalises, again and again, a batch holding
// a payload whose event the database refuses and another account's
// ordinary payload: the ordinary one is normalised at once; the failing
// one is rolled back alone each time, its attempts counted with growing
// delays, until MaxPayloadAttempts gives it up with its reason.
func TestProcessPayloadsGivesUp(t *testing.T) {
	t.Parallel()
	f := newIsolationFixture(t, "message_events", `NEW.recipient LIKE 'poison%'`)
	ctx := context.Background()
	payload := func(p *dbsqlc.SendingProvider, key, recipient string) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		body := `{"signature":{},"event-data":{"id":"` + key + `","event":"failed","severity":"permanent","recipient":"` + recipient + `","timestamp":1700000000}}`
		_, err := f.pool.Exec(ctx, `INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, $4, '\x00', $5)`,
			id, p.ID, p.AccountID, key, []byte(body))
		require.NoError(t, err)
		return id
	}
	bad := payload(f.providers[0], "bad", "poison@example.com")
	good := payload(f.providers[1], "good", "alice@example.com")
	run := func() BatchResult {
		t.Helper()
		res, err := dbutil.WithTxV(ctx, f.pool, func(ctx context.Context, tx pgx.Tx) (BatchResult, error) {
			return ProcessPayloads(ctx, tx, []uuid.UUID{bad, good}, time.Now())
		})
		require.NoError(t, err)
		return res
	}
	for attempt := 1; attempt <= MaxPayloadAttempts; attempt++ {
		res := run()
		require.Equal(t, 1, res.Processed, "attempt %d", attempt)
		require.Len(t, res.Failures, 1)
		fail := res.Failures[0]
		require.Equal(t, bad, fail.PayloadID)
		require.Equal(t, attempt, fail.Attempts)
		require.ErrorContains(t, fail.Err, "poisoned row refused")
		if attempt < MaxPayloadAttempts {
			require.False(t, fail.GivenUp)
			require.Equal(t, []uuid.UUID{bad}, res.Retry())
			require.Equal(t, 30*time.Second<<(attempt-1), res.RetryDelay())
		} else {
			require.True(t, fail.GivenUp)
			require.Empty(t, res.Retry())
		}
	}
	var processed bool
	var reason string
	var attempts int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT processed_at IS NOT NULL, error, attempts FROM provider_payloads WHERE id = $1`, bad).
		Scan(&processed, &reason, &attempts))
	require.True(t, processed, "given up")
	require.Contains(t, reason, "poisoned row refused")
	require.Equal(t, MaxPayloadAttempts, attempts)
	var events int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM message_events WHERE payload_id = $1`, good).Scan(&events))
	require.Equal(t, 1, events, "the other account's payload was normalised once")

	res := run()
	require.Equal(t, BatchResult{Processed: 2}, res, "nothing left to do")
}
