package webhook

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

func TestGenerateSecret(t *testing.T) {
	t.Parallel()

	s1, s2 := GenerateSecret(), GenerateSecret()
	require.NotEqual(t, s1, s2)
	require.True(t, strings.HasPrefix(s1, "whsec_"))
	require.NoError(t, ValidateSecret(s1))
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s1, "whsec_"))
	require.NoError(t, err)
	require.Len(t, key, 32)
}

func TestValidateSecret(t *testing.T) {
	t.Parallel()

	enc := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n)) }

	for _, ok := range []string{"whsec_" + enc(24), "whsec_" + enc(32), "whsec_" + enc(64), "whsec_" + enc(40)} {
		require.NoError(t, ValidateSecret(ok), ok)
	}
	for _, tt := range []struct{ name, secret, want string }{
		{"Empty", "", `invalid signing secret: must start with "whsec_"`},
		{"NoPrefix", enc(32), `invalid signing secret: must start with "whsec_"`},
		{"WrongPrefix", "whsec-" + enc(32), `must start with "whsec_"`},
		{"NotBase64", "whsec_not*base64", "must be standard base64"},
		{"URLBase64", "whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))), "must be standard base64"},
		{"Unpadded", "whsec_" + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 25)), "must be standard base64"},
		{"Whitespace", "whsec_" + enc(16) + "\n" + enc(16), "must not contain whitespace"},
		{"TooShort", "whsec_" + enc(23), "must encode 24 to 64 bytes, got 23"},
		{"TooLong", "whsec_" + enc(65), "must encode 24 to 64 bytes, got 65"},
		{"EmptyKey", "whsec_", "got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateSecret(tt.secret)
			require.ErrorIs(t, err, ErrInvalidSecret)
			require.ErrorContains(t, err, tt.want)
			if len(tt.secret) > len("whsec_")+4 {
				require.NotContains(t, err.Error(), tt.secret[6:], "never echo the secret")
			}
		})
	}
}

func TestSign(t *testing.T) {
	t.Parallel()

	t.Run("KnownVector", func(t *testing.T) {
		t.Parallel()
		// Computed independently with
		//   printf 'msg_1.1700000000.{"a":1}' | openssl dgst -sha256 -mac HMAC \
		//     -macopt hexkey:000102...1f -binary | base64
		// (the key is the bytes 0x00 to 0x1f); sub-second time is dropped.
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(i)
		}
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		sig, err := Sign(secret, "msg_1", time.Unix(1700000000, 999_000_000), []byte(`{"a":1}`))
		require.NoError(t, err)
		require.Equal(t, "v1,AMaOha7DUT/0J0JMycRuYOBSvbx3WtwLd2khXXbaVj4=", sig)
	})

	t.Run("VerifiesWithOfficialLibrary", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{
			GenerateSecret(),
			"whsec_" + base64.StdEncoding.EncodeToString([]byte("a user supplied secret of 40 bytes......")),
			"whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, 24)),
			"whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x01}, 64)),
		} {
			require.NoError(t, ValidateSecret(secret))
			now := time.Now()
			body := []byte(`{"type":"test","timestamp":"2026-01-01T00:00:00Z","data":{"x":"é<>&"}}`)
			sig, err := Sign(secret, "01J0000000000000000000000", now, body)
			require.NoError(t, err)

			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			header := http.Header{}
			header.Set(standardwebhooks.HeaderWebhookID, "01J0000000000000000000000")
			header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
			header.Set(standardwebhooks.HeaderWebhookSignature, sig)
			require.NoError(t, wh.Verify(body, header))

			// Any change to id, timestamp or body breaks it.
			require.Error(t, wh.Verify(append(bytes.Clone(body), ' '), header))
			header.Set(standardwebhooks.HeaderWebhookID, "other")
			require.Error(t, wh.Verify(body, header))
		}
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		_, err := Sign("nope", "id", time.Now(), nil)
		require.ErrorIs(t, err, ErrInvalidSecret)
		_, err = Sign("whsec_!!", "id", time.Now(), nil)
		require.ErrorIs(t, err, ErrInvalidSecret)
		_, err = Sign("whsec_", "id", time.Now(), nil)
		require.ErrorIs(t, err, ErrInvalidSecret)
		_, err = Sign(GenerateSecret(), "", time.Now(), nil)
		require.EqualError(t, err, "empty message id")
	})
}

// BenchmarkSignAll measures the signature header of a 1 KiB push under one
// secret (the baseline) and under two (a rotation in grace), in the same
// run.
func BenchmarkSignAll(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	now := time.Now()
	for _, n := range []int{1, 2} {
		secrets := make([]string, n)
		for i := range secrets {
			secrets[i] = GenerateSecret()
		}
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SignAll(secrets, "msg_bench", now, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
