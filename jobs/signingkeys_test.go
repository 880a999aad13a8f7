package jobs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

func TestSigningKeyRotateWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{3}, 32))
	require.NoError(t, err)
	now := time.Now().UTC()
	w := &SigningKeyRotateWorker{deps: Deps{
		Pool: pool, Keyring: keyring, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Settings: Settings{JWTKeyRotation: time.Hour, JWTTTL: 15 * time.Minute},
		Now:      func() time.Time { return now },
	}}
	states := func() map[string]int {
		rows, err := pool.Query(ctx, `SELECT state, count(*) FROM signing_keys GROUP BY state`)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var s string
			var n int
			require.NoError(t, rows.Scan(&s, &n))
			out[s] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	work := func() { require.NoError(t, w.Work(ctx, &river.Job[identity.SigningKeyRotateArgs]{})) }

	work()
	require.Equal(t, map[string]int{"current": 1, "next": 1}, states(), "a fresh database gets its first keys")
	work()
	require.Equal(t, map[string]int{"current": 1, "next": 1}, states(), "nothing is due")

	now = now.Add(61 * time.Minute)
	work()
	require.Equal(t, map[string]int{"current": 1, "next": 1, "retired": 1}, states(), "the next key is promoted")

	// Past the grace (token lifetime + cache + leeway) the retired key goes.
	now = now.Add(17 * time.Minute)
	work()
	require.Equal(t, map[string]int{"current": 1, "next": 1}, states(), "the retired key is deleted once its tokens have expired")

	// Without a keyring the job cannot seal keys and cancels itself.
	w.deps.Keyring = nil
	err = w.Work(ctx, &river.Job[identity.SigningKeyRotateArgs]{})
	var cancel *river.JobCancelError
	require.ErrorAs(t, err, &cancel)
}
