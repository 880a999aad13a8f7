package secretbox

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func randomKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

func b64(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

func TestKeyID(t *testing.T) {
	t.Parallel()

	key := bytes.Repeat([]byte{0x42}, KeySize)
	id := KeyID(key)
	require.Len(t, id, 8)
	require.Equal(t, id, KeyID(bytes.Repeat([]byte{0x42}, KeySize)), "deterministic")
	require.NotEqual(t, id, KeyID(bytes.Repeat([]byte{0x43}, KeySize)))
	require.Regexp(t, `^[0-9a-f]{8}$`, id)
}

func TestSealOpen(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *Keyring {
		t.Helper()
		kr, err := NewKeyring(randomKey(t))
		require.NoError(t, err)
		return kr
	}

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		ct, keyID, err := kr.Seal([]byte("whsec_secret"), []byte("row-1"))
		require.NoError(t, err)
		require.Equal(t, kr.PrimaryKeyID(), keyID)
		require.Len(t, ct, 12+len("whsec_secret")+16)
		require.NotContains(t, string(ct), "whsec_secret")

		pt, err := kr.Open(keyID, ct, []byte("row-1"))
		require.NoError(t, err)
		require.Equal(t, "whsec_secret", string(pt))
	})

	t.Run("EmptyPlaintextAndNilAD", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		ct, keyID, err := kr.Seal(nil, nil)
		require.NoError(t, err)
		pt, err := kr.Open(keyID, ct, nil)
		require.NoError(t, err)
		require.Empty(t, pt)
	})

	t.Run("RandomNonce", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		ct1, _, err := kr.Seal([]byte("same"), nil)
		require.NoError(t, err)
		ct2, _, err := kr.Seal([]byte("same"), nil)
		require.NoError(t, err)
		require.NotEqual(t, ct1, ct2)
	})

	t.Run("Tampered", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		ct, keyID, err := kr.Seal([]byte("secret"), []byte("row-1"))
		require.NoError(t, err)
		for i := range ct {
			bad := bytes.Clone(ct)
			bad[i] ^= 0x01
			_, err := kr.Open(keyID, bad, []byte("row-1"))
			require.ErrorIs(t, err, ErrDecrypt, "byte %d flipped", i)
		}
		_, err = kr.Open(keyID, ct[:len(ct)-1], []byte("row-1"))
		require.ErrorIs(t, err, ErrDecrypt)
		_, err = kr.Open(keyID, ct[:5], []byte("row-1"))
		require.ErrorIs(t, err, ErrDecrypt)
		_, err = kr.Open(keyID, append(bytes.Clone(ct), 0), []byte("row-1"))
		require.ErrorIs(t, err, ErrDecrypt)
	})

	t.Run("WrongAssociatedData", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		ct, keyID, err := kr.Seal([]byte("secret"), []byte("row-1"))
		require.NoError(t, err)
		_, err = kr.Open(keyID, ct, []byte("row-2"))
		require.ErrorIs(t, err, ErrDecrypt)
		_, err = kr.Open(keyID, ct, nil)
		require.ErrorIs(t, err, ErrDecrypt)
	})

	t.Run("WrongKey", func(t *testing.T) {
		t.Parallel()
		kr := setup(t)
		other := setup(t)
		ct, keyID, err := kr.Seal([]byte("secret"), nil)
		require.NoError(t, err)

		_, err = other.Open(keyID, ct, nil)
		require.ErrorIs(t, err, ErrUnknownKeyID)
		require.Contains(t, err.Error(), keyID)

		// Even under the right id, a different key fails authentication.
		_, err = other.Open(other.PrimaryKeyID(), ct, nil)
		require.ErrorIs(t, err, ErrDecrypt)
	})
}

func TestRotation(t *testing.T) {
	t.Parallel()

	oldKey, newKey := randomKey(t), randomKey(t)
	oldRing, err := ParseKeyring(b64(oldKey), "")
	require.NoError(t, err)
	ct, oldID, err := oldRing.Seal([]byte("secret"), []byte("sub-1"))
	require.NoError(t, err)
	require.Equal(t, KeyID(oldKey), oldID)

	// After rotation: new primary, old key as previous.
	rotated, err := ParseKeyring(b64(newKey), " "+b64(oldKey)+" ,")
	require.NoError(t, err)
	require.Equal(t, KeyID(newKey), rotated.PrimaryKeyID())
	require.True(t, rotated.Has(oldID))
	require.True(t, rotated.NeedsReseal(oldID))

	pt, err := rotated.Open(oldID, ct, []byte("sub-1"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(pt))

	// Re-seal under the new primary.
	ct2, newID, err := rotated.Seal(pt, []byte("sub-1"))
	require.NoError(t, err)
	require.Equal(t, rotated.PrimaryKeyID(), newID)
	require.False(t, rotated.NeedsReseal(newID))

	// Once the old key is dropped, old ciphertexts no longer open, new ones do.
	dropped, err := ParseKeyring(b64(newKey), "")
	require.NoError(t, err)
	_, err = dropped.Open(oldID, ct, []byte("sub-1"))
	require.ErrorIs(t, err, ErrUnknownKeyID)
	pt, err = dropped.Open(newID, ct2, []byte("sub-1"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(pt))

	// The old ring cannot open what the new key sealed.
	_, err = oldRing.Open(newID, ct2, []byte("sub-1"))
	require.ErrorIs(t, err, ErrUnknownKeyID)
}

func TestParseKeyring(t *testing.T) {
	t.Parallel()

	good := b64(randomKey(t))

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		prev1, prev2 := randomKey(t), randomKey(t)
		kr, err := ParseKeyring(good+"\n", b64(prev1)+","+b64(prev2))
		require.NoError(t, err)
		require.True(t, kr.Has(KeyID(prev1)))
		require.True(t, kr.Has(KeyID(prev2)))
		require.False(t, kr.Has("00000000"))
	})

	t.Run("SameKeyTwice", func(t *testing.T) {
		t.Parallel()
		kr, err := ParseKeyring(good, good)
		require.NoError(t, err)
		require.Equal(t, "secretbox.Keyring{primary: "+kr.PrimaryKeyID()+", keys: 1}", kr.String())
	})

	for _, tt := range []struct {
		name, primary, previous, wantErr string
	}{
		{"Missing", "", "", "MAILWATCH_SECRET_KEY is not set"},
		{"Blank", "  ", "", "MAILWATCH_SECRET_KEY is not set"},
		{"NotBase64", "not base64!", "", "MAILWATCH_SECRET_KEY: not valid standard base64"},
		{"URLBase64", strings.NewReplacer("+", "-", "/", "_").Replace(b64(bytes.Repeat([]byte{0xfb}, 32))), "", "not valid standard base64"},
		{"TooShort", b64(make([]byte, 16)), "", "MAILWATCH_SECRET_KEY: key is 16 bytes, want 32"},
		{"TooLong", b64(make([]byte, 64)), "", "MAILWATCH_SECRET_KEY: key is 64 bytes, want 32"},
		{"AES128Sized", b64(make([]byte, 24)), "", "key is 24 bytes, want 32"},
		{"PreviousBad", good, b64(make([]byte, 32)) + ",abc", "MAILWATCH_SECRET_KEY_PREVIOUS entry 2: not valid standard base64"},
		{"PreviousShort", good, b64(make([]byte, 31)), "MAILWATCH_SECRET_KEY_PREVIOUS entry 1: key is 31 bytes, want 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseKeyring(tt.primary, tt.previous)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}

	t.Run("RawKeyLengths", func(t *testing.T) {
		t.Parallel()
		_, err := NewKeyring(make([]byte, 16))
		require.EqualError(t, err, "primary key: key is 16 bytes, want 32")
		_, err = NewKeyring(make([]byte, 32), make([]byte, 33))
		require.EqualError(t, err, "previous key 1: key is 33 bytes, want 32")
	})
}

func TestFromEnv(t *testing.T) {
	t.Parallel()

	key := randomKey(t)
	env := map[string]string{EnvPrimaryKey: b64(key)}
	kr, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, KeyID(key), kr.PrimaryKeyID())
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()

	k1, k2 := GenerateKey(), GenerateKey()
	require.NotEqual(t, k1, k2)
	_, err := ParseKeyring(k1, k2)
	require.NoError(t, err)
}

func TestNoKeyMaterialInFormatting(t *testing.T) {
	t.Parallel()

	key := randomKey(t)
	kr, err := NewKeyring(key)
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprint(kr), fmt.Sprintf("%+v", kr), fmt.Sprintf("%#v", kr)} {
		require.NotContains(t, s, b64(key))
		require.Contains(t, s, kr.PrimaryKeyID())
	}
}
