package sendgrid

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
)

type vector struct {
	PublicKey string `json:"public_key_base64_der"`
	Signature string `json:"signature"`
	Timestamp string `json:"timestamp"`
	RawBody   string `json:"raw_body"`
}

func loadVector(t testing.TB) vector {
	var v vector
	require.NoError(t, json.Unmarshal(corpus.Read(t, "esp/sendgrid-signed-vector.json"), &v))
	return v
}

func TestVerifyVector(t *testing.T) {
	t.Parallel()
	v := loadVector(t)
	key, err := ParsePublicKey(v.PublicKey)
	require.NoError(t, err)
	now := time.Now()
	body := []byte(v.RawBody)
	require.NoError(t, Verify(key, v.Signature, v.Timestamp, body, now, 0))

	t.Run("FlippedBodyByte", func(t *testing.T) {
		b := append([]byte(nil), body...)
		b[10] ^= 0x01
		require.ErrorIs(t, Verify(key, v.Signature, v.Timestamp, b, now, 0), esp.ErrSignature)
	})
	t.Run("OtherTimestamp", func(t *testing.T) {
		require.ErrorIs(t, Verify(key, v.Signature, "1600112503", body, now, 0), esp.ErrSignature)
	})
	t.Run("TooOldWithMaxAge", func(t *testing.T) {
		err := Verify(key, v.Signature, v.Timestamp, body, now, 10*time.Minute)
		require.True(t, errors.Is(err, esp.ErrTooOld))
		require.NoError(t, Verify(key, v.Signature, v.Timestamp, body, time.Unix(1600112502, 0).Add(time.Minute), 10*time.Minute))
	})
	t.Run("MissingHeaders", func(t *testing.T) {
		require.ErrorIs(t, Verify(key, "", v.Timestamp, body, now, 0), esp.ErrSignature)
	})
	t.Run("VectorBodyParses", func(t *testing.T) {
		evs, err := Parse(body)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, esp.TypeSuppressed, evs[0].Type)
	})
}

func TestParsePublicKeyRejects(t *testing.T) {
	t.Parallel()
	_, err := ParsePublicKey("not base64!")
	require.Error(t, err)
	_, err = ParsePublicKey("AAAA")
	require.Error(t, err)
}

func TestParseBatch(t *testing.T) {
	t.Parallel()
	body := []byte(`[{"email":"a@x.com","event":"processed","sg_event_id":"e1","sg_message_id":"m.1","timestamp":1},
		{"email":"b@x.com","event":"open","sg_event_id":"e2","timestamp":1},
		{"email":"c@x.com","event":"spamreport","sg_event_id":"e3","timestamp":1},
		{"email":"d@x.com","event":"deferred","sg_event_id":"e4","timestamp":1}]`)
	evs, err := Parse(body)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, []esp.Type{esp.TypeSent, esp.TypeComplained, esp.TypeDeferred}, []esp.Type{evs[0].Type, evs[1].Type, evs[2].Type})
	_, err = Parse([]byte(`{"not":"an array"}`))
	require.ErrorIs(t, err, esp.ErrPayload)
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"sendgrid-dropped.json", "sendgrid-bounce.json", "sendgrid-blocked-no-status.json"} {
		f.Add(corpus.Read(f, "esp/"+name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := Parse(body)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrPayload)
			return
		}
		for _, e := range evs {
			require.NotEmpty(t, e.ID)
			require.LessOrEqual(t, len(e.ID), esp.MaxIDLength)
		}
	})
}

func FuzzParseSignatureHeaders(f *testing.F) {
	v := loadVector(f)
	f.Add(v.Signature, v.Timestamp)
	f.Add("", "1")
	f.Fuzz(func(t *testing.T, sig, ts string) {
		_, _, err := ParseSignatureHeaders(sig, ts)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrSignature)
		}
	})
}
