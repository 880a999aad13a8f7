package resend

import (
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
)

// The corpus has Resend payloads but no signed vector, so the test signs
// the corpus bodies with the Standard Webhooks library (Svix's scheme).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func sign(t testing.TB, id string, ts time.Time, body []byte) Headers {
	wh, err := standardwebhooks.NewWebhook(testSecret)
	require.NoError(t, err)
	sig, err := wh.Sign(id, ts, body)
	require.NoError(t, err)
	return Headers{ID: id, Timestamp: strconv.FormatInt(ts.Unix(), 10), Signature: sig}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateSecret(testSecret))
	for _, name := range []string{"resend-sent.json", "resend-bounced.json", "resend-bounced-suppressed.json", "resend-complained.json"} {
		t.Run(name, func(t *testing.T) {
			body := corpus.Read(t, "esp/"+name)
			old := time.Date(2023, 10, 2, 18, 11, 26, 0, time.UTC)
			h := sign(t, "msg_2XX", old, body)
			require.NoError(t, Verify(testSecret, h, body, time.Now(), 0))
			require.ErrorIs(t, Verify(testSecret, h, body, time.Now(), 5*time.Minute), esp.ErrTooOld)

			b := append([]byte(nil), body...)
			b[len(b)/2] ^= 0x01
			require.ErrorIs(t, Verify(testSecret, h, b, time.Now(), 0), esp.ErrSignature)
			h2 := h
			h2.ID = "msg_other"
			require.ErrorIs(t, Verify(testSecret, h2, body, time.Now(), 0), esp.ErrSignature)
		})
	}
}

func TestParseMultipleRecipients(t *testing.T) {
	t.Parallel()
	evs, err := Parse([]byte(`{"type":"email.delivered","created_at":"2024-01-01T00:00:00Z","data":{"email_id":"e","to":["a@x.com","B@x.com"]}}`), "msg_1")
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "msg_1/b@x.com", evs[1].ID)
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"resend-sent.json", "resend-bounced.json", "resend-bounced-suppressed.json", "resend-complained.json"} {
		f.Add(corpus.Read(f, "esp/"+name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := Parse(body, "id")
		if err != nil {
			require.ErrorIs(t, err, esp.ErrPayload)
		}
	})
}

func FuzzParseHeaders(f *testing.F) {
	f.Add("msg_1", "1700000000", "v1,abc v2,def")
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		_, err := ParseHeaders(Headers{ID: id, Timestamp: ts, Signature: sig})
		if err != nil {
			require.ErrorIs(t, err, esp.ErrSignature)
			return
		}
		require.True(t, strings.Contains(sig, "v1,"))
	})
}
