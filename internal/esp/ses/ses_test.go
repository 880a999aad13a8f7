package ses_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/esp/ses/snstest"
)

const topic = "arn:aws:sns:us-east-1:123456789012:ses-events"

// TestVerifyOverLoopbackHTTPS signs the corpus SES notifications as SNS
// does (versions 1 and 2) with a key the test makes, serves its certificate
// from a loopback HTTPS server answering as sns.us-east-1.amazonaws.com, and
// verifies them through the real fetcher.
func TestVerifyOverLoopbackHTTPS(t *testing.T) {
	t.Parallel()
	sns := snstest.New(t)
	fetcher := &ses.HTTPCertFetcher{Client: sns.Client()}
	ctx := context.Background()
	for _, name := range []string{"ses-bounce.json", "ses-complaint.json", "ses-delivery.json"} {
		for _, version := range []string{"1", "2"} {
			body := sns.Notification(topic, "mid-"+name+version, string(corpus.Read(t, "esp/"+name)), version)
			env, err := ses.ParseEnvelope(body)
			require.NoError(t, err)
			require.NoError(t, ses.Verify(ctx, env, fetcher, []string{topic}, time.Now(), time.Hour), name)
			evs, err := ses.Parse(body)
			require.NoError(t, err)
			require.NotEmpty(t, evs)

			// One flipped byte of the signed message fails.
			flipped := *env
			m := []byte(flipped.Message)
			m[5] ^= 0x01
			flipped.Message = string(m)
			require.ErrorIs(t, ses.Verify(ctx, &flipped, fetcher, []string{topic}, time.Now(), 0), esp.ErrSignature)
			// A topic outside the allow-list fails.
			require.ErrorIs(t, ses.Verify(ctx, env, fetcher, []string{"arn:aws:sns:us-east-1:123456789012:other"}, time.Now(), 0), esp.ErrSignature)
		}
	}
	require.Equal(t, 1, sns.CertFetches(), "the certificate is cached")

	t.Run("SubscriptionConfirmation", func(t *testing.T) {
		body := sns.SubscriptionConfirmation(topic, "tok123")
		env, err := ses.ParseEnvelope(body)
		require.NoError(t, err)
		require.NoError(t, ses.Verify(ctx, env, fetcher, []string{topic}, time.Now(), 0))
		env.Token = "tok124"
		require.ErrorIs(t, ses.Verify(ctx, env, fetcher, []string{topic}, time.Now(), 0), esp.ErrSignature)
	})
	t.Run("CertificateHostRefused", func(t *testing.T) {
		body := sns.Notification(topic, "m-host", `{"notificationType":"Delivery"}`, "2")
		var m map[string]string
		require.NoError(t, json.Unmarshal(body, &m))
		for _, bad := range []string{
			"http://sns.us-east-1.amazonaws.com/x.pem",
			"https://sns.us-east-1.amazonaws.com.evil.example/x.pem",
			"https://evil.example/sns.us-east-1.amazonaws.com/x.pem",
			"https://sns.us-east-1.amazonaws.com:8443/x.pem",
		} {
			m["SigningCertURL"] = bad
			b, _ := json.Marshal(m)
			env, err := ses.ParseEnvelope(b)
			require.NoError(t, err)
			require.ErrorIs(t, ses.Verify(ctx, env, fetcher, []string{topic}, time.Now(), 0), esp.ErrSignature, bad)
		}
	})
}

// TestCorpusEnvelopes checks the corpus SNS envelopes parse and that their
// placeholder signatures never verify.
func TestCorpusEnvelopes(t *testing.T) {
	t.Parallel()
	sns := snstest.New(t)
	fetcher := &ses.HTTPCertFetcher{Client: sns.Client()}
	for _, name := range []string{"ses-sns-notification-bounce.json", "ses-sns-subscription-confirmation.json"} {
		env, err := ses.ParseEnvelope(corpus.Read(t, "esp/"+name))
		require.NoError(t, err)
		require.True(t, ses.ValidTopicARN(env.TopicArn), env.TopicArn)
		require.Error(t, ses.Verify(context.Background(), env, fetcher, []string{env.TopicArn}, time.Now(), 0))
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"ses-sns-notification-bounce.json", "ses-sns-subscription-confirmation.json"} {
		f.Add(corpus.Read(f, "esp/"+name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := ses.Parse(body)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrPayload)
		}
	})
}

func FuzzParseNotification(f *testing.F) {
	for _, name := range []string{"ses-bounce.json", "ses-complaint.json", "ses-delivery.json"} {
		f.Add(corpus.Read(f, "esp/"+name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := ses.ParseNotification(body)
		if err != nil {
			require.ErrorIs(t, err, esp.ErrPayload)
		}
	})
}

func FuzzCheckAWSURL(f *testing.F) {
	f.Add("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ses.CheckAWSURL(raw)
		if err == nil {
			require.Equal(t, "https", u.Scheme)
		}
	})
}
