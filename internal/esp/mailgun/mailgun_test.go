package mailgun

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
)

var payloadFiles = []string{
	"mailgun-complained.json", "mailgun-delivered.json", "mailgun-permanent_failure.json",
	"mailgun-permanent_failure_no_description.json", "mailgun-suppression_failure.json", "mailgun-temporary_failure.json",
}

func signingKey(t testing.TB) string {
	var v struct {
		SigningKey string `json:"signing_key"`
		Timestamp  string `json:"timestamp"`
		Token      string `json:"token"`
		Expected   string `json:"expected_signature"`
	}
	require.NoError(t, json.Unmarshal(corpus.Read(t, "esp/mailgun-signature-vector.json"), &v))
	require.NoError(t, Verify(v.SigningKey, Signature{Timestamp: v.Timestamp, Token: v.Token, Signature: v.Expected}, time.Now(), 0))
	return v.SigningKey
}

func TestVerifyCorpus(t *testing.T) {
	t.Parallel()
	key := signingKey(t)
	for _, name := range payloadFiles {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePayload(corpus.Read(t, "esp/"+name))
			require.NoError(t, err)
			require.NoError(t, Verify(key, p.Signature, time.Now(), 0))

			flipped := p.Signature
			b := []byte(flipped.Token)
			b[0] ^= 0x01
			flipped.Token = string(b)
			require.ErrorIs(t, Verify(key, flipped, time.Now(), 0), esp.ErrSignature)
			require.ErrorIs(t, Verify(key+"x", p.Signature, time.Now(), 0), esp.ErrSignature)
			// The vectors are years old: with a window they are refused.
			require.ErrorIs(t, Verify(key, p.Signature, time.Now(), time.Hour), esp.ErrTooOld)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range payloadFiles {
		f.Add(corpus.Read(f, "esp/"+name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := Parse(body)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrPayload)
			return
		}
		require.LessOrEqual(t, len(evs), 1)
	})
}

func FuzzParseSignature(f *testing.F) {
	f.Add("1661590666", "fff0ebc59c0516f4ce0823212a2f45e5c67814420b99fe558b", "a0cd251821d8fd56a2130b541becc8e441023574e602fe9829a9ab9fbfdea33f")
	f.Fuzz(func(t *testing.T, ts, token, sig string) {
		_, _, err := ParseSignature(Signature{Timestamp: ts, Token: token, Signature: sig})
		if err != nil {
			require.ErrorIs(t, err, esp.ErrSignature)
		}
	})
}
