package pgtext_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/pgtext"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCheckAndClean(t *testing.T) {
	t.Parallel()
	require.NoError(t, pgtext.Check("plain ünïcode"))
	require.ErrorIs(t, pgtext.Check("a\x00b"), pgtext.ErrNUL)
	require.ErrorIs(t, pgtext.Check("a\xffb"), pgtext.ErrUTF8)
	require.Equal(t, "plain", pgtext.Clean("plain"))
	require.Equal(t, "a\uFFFDb\uFFFDc", pgtext.Clean("a\x00b\xffc"))
	require.NoError(t, pgtext.Check(pgtext.Clean("\x00\xfe\xff\x00")))
}

// TestCheckJSONMatchesPostgres holds CheckJSON to what a real jsonb
// column accepts: every input it passes is stored, every one it refuses is
// refused by Postgres too.
func TestCheckJSONMatchesPostgres(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	ctx := context.Background()
	for raw, want := range map[string]error{
		`{"a":"b"}`:                  nil,
		`{"a":"\\u0000"}`:            nil, // an escaped backslash, then text
		`{"a":"\u00e9\ud83d\ude00"}`: nil,
		`{"a":"x\u0000y"}`:           pgtext.ErrNUL,
		`{"a":"\\\u0000"}`:           pgtext.ErrNUL,
		`{"\u0000":1}`:               pgtext.ErrNUL,
		`{"a":"\ud800"}`:             pgtext.ErrSurrogate,
		`{"a":"\ud800x"}`:            pgtext.ErrSurrogate,
		`{"a":"\ud800\u0041"}`:       pgtext.ErrSurrogate,
		`{"a":"\udc00"}`:             pgtext.ErrSurrogate,
	} {
		got := pgtext.CheckJSON([]byte(raw))
		_, err := tx.Exec(ctx, `SAVEPOINT s`)
		require.NoError(t, err)
		_, stored := tx.Exec(ctx, `SELECT $1::text::jsonb`, raw)
		_, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT s`)
		require.NoError(t, err)
		if want == nil {
			require.NoError(t, got, raw)
			require.NoError(t, stored, raw)
		} else {
			require.ErrorIs(t, got, want, raw)
			require.Error(t, stored, raw)
		}
	}
	// A malformed escape is left to the JSON parser.
	require.NoError(t, pgtext.CheckJSON([]byte(`{"b":"\u0"}`)))
	require.ErrorIs(t, pgtext.CheckJSON([]byte("{\"a\":\"\xff\"}")), pgtext.ErrUTF8)
}
