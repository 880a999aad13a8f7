package inbound

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestVerifyStandardWebhook(t *testing.T) {
	t.Parallel()

	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	body := []byte("From: a@example.com\r\nTo: r@inbound.mailwatch.test\r\n\r\nhi\r\n")
	now := time.Unix(1_700_000_000, 0)

	// sign computes the signature independently of the library, as the
	// sender would: base64(HMAC-SHA256(key, "id.timestamp.body")).
	sign := func(key []byte, id string, ts time.Time, body []byte) string {
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%d.%s", id, ts.Unix(), body)
		return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	headers := func(id string, ts time.Time, sig string) http.Header {
		h := http.Header{}
		h.Set(HeaderWebhookID, id)
		h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(HeaderWebhookSignature, sig)
		return h
	}

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		h := headers("msg_1", now, sign(key, "msg_1", now, body))
		require.NoError(t, VerifyStandardWebhook(secret, h, body, now))

		// Within tolerance on either side.
		require.NoError(t, VerifyStandardWebhook(secret, h, body, now.Add(WebhookTolerance)))
		require.NoError(t, VerifyStandardWebhook(secret, h, body, now.Add(-WebhookTolerance)))
	})

	t.Run("SecretWithoutPrefix", func(t *testing.T) {
		t.Parallel()
		h := headers("msg_1", now, sign(key, "msg_1", now, body))
		require.NoError(t, VerifyStandardWebhook(base64.StdEncoding.EncodeToString(key), h, body, now))
	})

	t.Run("MultipleSignatures", func(t *testing.T) {
		t.Parallel()
		oldKey := []byte("an older key during rotation....")
		good := sign(key, "msg_2", now, body)
		other := sign(oldKey, "msg_2", now, body)

		// A rotating sender sends both; either order verifies.
		require.NoError(t, VerifyStandardWebhook(secret, headers("msg_2", now, other+" "+good), body, now))
		require.NoError(t, VerifyStandardWebhook(secret, headers("msg_2", now, good+" "+other), body, now))
		// Unknown versions are skipped, not fatal.
		require.NoError(t, VerifyStandardWebhook(secret, headers("msg_2", now, "v1a,xyz "+good), body, now))
		// None of them matching fails.
		err := VerifyStandardWebhook(secret, headers("msg_2", now, other+" v2,"+good[3:]), body, now)
		require.ErrorIs(t, err, ErrWebhookSignature)
	})

	t.Run("Tampered", func(t *testing.T) {
		t.Parallel()
		sig := sign(key, "msg_3", now, body)

		for name, tc := range map[string]struct {
			h    http.Header
			body []byte
		}{
			"Body":         {headers("msg_3", now, sig), append([]byte("X"), body...)},
			"ID":           {headers("msg_4", now, sig), body},
			"Timestamp":    {headers("msg_3", now.Add(time.Second), sig), body},
			"OtherKey":     {headers("msg_3", now, sign([]byte("wrong key"), "msg_3", now, body)), body},
			"Garbage":      {headers("msg_3", now, "v1,!!!"), body},
			"NoVersion":    {headers("msg_3", now, sig[3:]), body},
			"MissingID":    {headers("", now, sig), body},
			"MissingSig":   {headers("msg_3", now, ""), body},
			"BadTimestamp": {http.Header{HeaderWebhookID: {"msg_3"}, HeaderWebhookTimestamp: {"soon"}, HeaderWebhookSignature: {sig}}, body},
		} {
			err := VerifyStandardWebhook(secret, tc.h, tc.body, now)
			require.ErrorIs(t, err, ErrWebhookSignature, name)
			require.NotErrorIs(t, err, ErrWebhookTimestamp, name)
		}
	})

	t.Run("Stale", func(t *testing.T) {
		t.Parallel()
		old := now.Add(-WebhookTolerance - time.Second)
		err := VerifyStandardWebhook(secret, headers("msg_5", old, sign(key, "msg_5", old, body)), body, now)
		require.ErrorIs(t, err, ErrWebhookTimestamp)
		require.ErrorIs(t, err, ErrWebhookSignature)

		future := now.Add(WebhookTolerance + time.Second)
		err = VerifyStandardWebhook(secret, headers("msg_5", future, sign(key, "msg_5", future, body)), body, now)
		require.ErrorIs(t, err, ErrWebhookTimestamp)
	})

	t.Run("BadSecret", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "whsec_", "whsec_not base64!"} {
			_, err := NewWebhookVerifier(s)
			require.ErrorIs(t, err, ErrWebhookSecret, s)
			require.ErrorIs(t, VerifyStandardWebhook(s, http.Header{}, body, now), ErrWebhookSecret, s)
		}
	})

	t.Run("SignRoundTrip", func(t *testing.T) {
		t.Parallel()
		v, err := NewWebhookVerifier(secret)
		require.NoError(t, err)
		sig, err := v.Sign("msg_6", now, body)
		require.NoError(t, err)
		require.Equal(t, sign(key, "msg_6", now, body), sig)
		require.NoError(t, v.Verify(headers("msg_6", now, sig), body, now))
	})
}
