package password

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHashVerify(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	h, err := Hash(ctx, "correct horse battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"))
	require.NotContains(t, h, "correct horse")
	require.NoError(t, Verify(ctx, "correct horse battery", h))
	require.ErrorIs(t, Verify(ctx, "correct horse batterx", h), ErrMismatch)

	h2, err := Hash(ctx, "correct horse battery")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salts must differ")

	require.Error(t, Verify(ctx, "x", "$bcrypt$whatever"))
	require.Error(t, Verify(ctx, "x", "$argon2id$v=19$m=1,t=1,p=1$!!$!!"))
}

func TestValidate(t *testing.T) {
	t.Parallel()

	require.NoError(t, Validate("12345678"))
	require.NoError(t, Validate(strings.Repeat("é", 256)))
	require.ErrorContains(t, Validate("1234567"), "at least 8")
	require.ErrorContains(t, Validate(strings.Repeat("a", 257)), "at most 256")
	require.ErrorContains(t, Validate("        "), "whitespace")
	require.ErrorContains(t, Validate("abcdefg\xff"), "UTF-8")
}

// TestLimiterBoundsConcurrentHashes: however many callers, no more than the
// limiter's slots compute at once; callers that cannot get a slot within
// the queue wait get ErrBusy, and a held slot refuses the next caller.
func TestLimiterBoundsConcurrentHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Bound", func(t *testing.T) {
		t.Parallel()
		l := NewLimiter(2, time.Hour)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.Hash(ctx, "correct horse battery")
				require.NoError(t, err)
			}()
		}
		wg.Wait()
		require.Equal(t, int64(2), l.Peak())
	})

	t.Run("BusyAfterQueueWait", func(t *testing.T) {
		t.Parallel()
		l := NewLimiter(1, time.Millisecond)
		release, err := l.Acquire(ctx)
		require.NoError(t, err)
		_, err = l.Hash(ctx, "correct horse battery")
		require.ErrorIs(t, err, ErrBusy)
		require.ErrorIs(t, l.Verify(ctx, "x", "$argon2id$"), ErrBusy)
		release()
		_, err = l.Hash(ctx, "correct horse battery")
		require.NoError(t, err)
	})

	t.Run("CancelledWhileQueued", func(t *testing.T) {
		t.Parallel()
		l := NewLimiter(1, time.Hour)
		release, err := l.Acquire(ctx)
		require.NoError(t, err)
		defer release()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = l.Hash(cctx, "correct horse battery")
		require.True(t, errors.Is(err, ErrBusy) && errors.Is(err, context.Canceled), "%v", err)
	})
}
