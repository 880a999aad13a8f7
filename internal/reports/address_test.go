package reports_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

func key(b byte) []byte {
	k := make([]byte, secretbox.KeySize)
	for i := range k {
		k[i] = b
	}
	return k
}

func ring(t *testing.T, primary []byte, previous ...[]byte) *secretbox.Keyring {
	kr, err := secretbox.NewKeyring(primary, previous...)
	require.NoError(t, err)
	return kr
}

func TestSigner(t *testing.T) {
	t.Parallel()
	account := uuid.MustParse("0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f70")
	s := &reports.Signer{Keyring: ring(t, key(1)), Domain: "inbound.mailwatch.test"}

	lp := s.Current(reports.KindDMARC, account, "example.com")
	require.Equal(t, lp, s.Current(reports.KindDMARC, account, "Example.com"), "deterministic, case-insensitive domain")
	require.True(t, strings.HasPrefix(lp, "dmarc+"+secretbox.KeyID(key(1))))
	require.LessOrEqual(t, len(lp), 64, "RFC 5321 local-part limit")
	require.NotEqual(t, lp, s.Current(reports.KindDMARC, account, "example.org"))
	require.NotEqual(t, lp, s.Current(reports.KindDMARC, uuid.New(), "example.com"))
	tls := s.Current(reports.KindTLSRPT, account, "example.com")
	require.NotEqual(t, reports.Token(lp), reports.Token(tls), "DMARC and TLS-RPT addresses differ")

	p, err := s.ParseLocalPart(strings.ToUpper(lp))
	require.NoError(t, err)
	require.NoError(t, s.Verify(p, account, "example.com"))
	require.ErrorIs(t, s.Verify(p, account, "example.org"), reports.ErrBadAddress)
	require.ErrorIs(t, s.Verify(p, uuid.New(), "example.com"), reports.ErrBadAddress)

	// Tampering with any character of the MAC fails.
	last := lp[len(lp)-1]
	flipped := byte('0')
	if last == '0' {
		flipped = '1'
	}
	p2, err := s.ParseLocalPart(lp[:len(lp)-1] + string(flipped))
	require.NoError(t, err, "still well-formed")
	require.ErrorIs(t, s.Verify(p2, account, "example.com"), reports.ErrBadAddress)
	for _, bad := range []string{"dmarc", "dmarc+", "dmarc+zz", "spam+" + reports.Token(lp), lp + "0", "dmarc+" + strings.Repeat("g", 32)} {
		_, err := s.ParseLocalPart(bad)
		require.ErrorIs(t, err, reports.ErrBadAddress, bad)
	}

	// Rotation: the new primary mints new addresses; the old ones verify
	// while the old key is a previous key, and stop when it is dropped.
	rotated := &reports.Signer{Keyring: ring(t, key(2), key(1)), Domain: s.Domain}
	require.NotEqual(t, lp, rotated.Current(reports.KindDMARC, account, "example.com"))
	p, err = rotated.ParseLocalPart(lp)
	require.NoError(t, err)
	require.NoError(t, rotated.Verify(p, account, "example.com"))
	dropped := &reports.Signer{Keyring: ring(t, key(2)), Domain: s.Domain}
	_, err = dropped.ParseLocalPart(lp)
	require.ErrorIs(t, err, reports.ErrBadAddress)
}
