package apikey

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGenerate(t *testing.T) {
	t.Parallel()

	seen := map[string]bool{}
	counts := map[byte]int{}
	for i := 0; i < 2000; i++ {
		k := Generate()
		require.True(t, strings.HasPrefix(k.Plain, "mw_"))
		require.Len(t, k.Plain, 43)
		require.True(t, WellFormed(k.Plain), k.Plain)
		require.Equal(t, k.Plain[:7], k.Identifier)
		sum := sha256.Sum256([]byte(k.Plain))
		require.Equal(t, sum[:], k.Hash)
		require.False(t, seen[k.Plain], "duplicate key")
		seen[k.Plain] = true
		for i := 3; i < len(k.Plain); i++ {
			counts[k.Plain[i]]++
		}
	}
	// Every base62 character shows up; none dominates.
	require.Len(t, counts, 62)
	for c, n := range counts {
		require.Less(t, n, 2*2000*40/62, "character %q over-represented", c)
	}
}

func TestWellFormed(t *testing.T) {
	t.Parallel()

	good := Generate().Plain
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"Generated", good, true},
		{"Empty", "", false},
		{"WrongPrefix", "xx_" + good[3:], false},
		{"TooShort", good[:42], false},
		{"TooLong", good + "a", false},
		{"BadCharacter", good[:10] + "-" + good[11:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, WellFormed(tc.in))
		})
	}
}
