package postmark

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
)

func basic(u, p string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	require.NoError(t, Verify("hook", "s3cret:pass", basic("hook", "s3cret:pass"), "198.51.100.7", nil))
	require.ErrorIs(t, Verify("hook", "s3cret:pass", basic("hook", "s3cret:pasS"), "198.51.100.7", nil), esp.ErrSignature)
	require.ErrorIs(t, Verify("hook", "s3cret:pass", basic("hooK", "s3cret:pass"), "198.51.100.7", nil), esp.ErrSignature)
	require.ErrorIs(t, Verify("hook", "pw", "", "198.51.100.7", nil), esp.ErrSignature)
	require.ErrorIs(t, Verify("hook", "pw", "Bearer x", "198.51.100.7", nil), esp.ErrSignature)

	allowed, err := ParseAllowList([]string{"3.134.147.250", "50.31.156.0/24"})
	require.NoError(t, err)
	require.NoError(t, Verify("hook", "pw", basic("hook", "pw"), "50.31.156.6", allowed))
	require.NoError(t, Verify("hook", "pw", basic("hook", "pw"), "::ffff:3.134.147.250", allowed))
	require.ErrorIs(t, Verify("hook", "pw", basic("hook", "pw"), "50.31.157.6", allowed), esp.ErrSignature)
	_, err = ParseAllowList([]string{"not-an-ip"})
	require.Error(t, err)
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"postmark-bounce.json", "postmark-delivery.json", "postmark-spam_complaint.json", "postmark-subscription_change.json"} {
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

func FuzzParseBasicAuth(f *testing.F) {
	f.Add(basic("u", "p"))
	f.Add("Basic !!!")
	f.Fuzz(func(t *testing.T, h string) {
		_, _, err := ParseBasicAuth(h)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrSignature)
		}
	})
}
