package emailaddr

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalise(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{in: "alice@example.com", want: "alice@example.com"},
		{in: "  Alice@Example.COM\t", want: "alice@example.com"},
		{in: "a.b+tag@sub.example.co.uk", want: "a.b+tag@sub.example.co.uk"},
		{in: "", err: ErrInvalid},
		{in: "   ", err: ErrInvalid},
		{in: "alice", err: ErrInvalid},
		{in: "@example.com", err: ErrInvalid},
		{in: "alice@", err: ErrInvalid},
		{in: "Alice <alice@example.com>", err: ErrInvalid},
		{in: "<alice@example.com>", err: ErrInvalid},
		{in: "alice@example.com, bob@example.com", err: ErrInvalid},
		{in: "alice@localhost", err: ErrNoDomainName},
		{in: "alice@example.com.", err: ErrInvalid},
		{in: "alice@.example.com", err: ErrInvalid},
		{in: "alice@[192.0.2.1]", err: ErrNoDomainName},
	} {
		got, err := Normalise(tc.in)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, "%q", tc.in)
			require.Empty(t, got, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
		again, err := Normalise(got)
		require.NoError(t, err)
		require.Equal(t, got, again, "Normalise is idempotent")
	}
}
