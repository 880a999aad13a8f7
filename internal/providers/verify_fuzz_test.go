package providers_test

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/providers"
)

type noCerts struct{}

func (noCerts) Certificate(context.Context, string) (*x509.Certificate, error) {
	return nil, errors.New("no certificates here")
}

// FuzzVerify feeds arbitrary bodies and headers to every kind's
// verification: it must answer a signature error (401), a payload error
// (400) or, for SNS, a certificate error (503), never anything the API would
// turn into a 500, and never accept.
func FuzzVerify(f *testing.F) {
	for _, name := range []string{"sendgrid-dropped.json", "mailgun-delivered.json", "resend-sent.json", "postmark-bounce.json", "ses-sns-notification-bounce.json"} {
		f.Add(corpus.Read(f, "esp/"+name), "1600112502", "MEUCIGHQ", "Basic aG9vazpwdw==")
	}
	cfgs := map[string]providers.Config{
		providers.KindSendGrid: {PublicKey: "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="},
		providers.KindMailgun:  {SigningKey: "key-not-the-real-one-0000"},
		providers.KindResend:   {SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		providers.KindPostmark: {BasicAuthUser: "hook", BasicAuthPassword: "a long password"},
		providers.KindSES:      {TopicARNs: []string{"arn:aws:sns:us-east-1:1234567890:SES_Events"}},
	}
	f.Fuzz(func(t *testing.T, body []byte, ts, sig, auth string) {
		headers := map[string]string{
			"X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts,
			"svix-id": ts, "svix-timestamp": ts, "svix-signature": sig, "Authorization": auth,
		}
		for kind, cfg := range cfgs {
			row := &dbsqlc.SendingProvider{ID: uuid.New(), Kind: kind}
			_, err := providers.Verify(context.Background(), row, cfg, noCerts{}, providers.Request{
				Header: func(name string) string { return headers[name] }, Body: body, ClientIP: "192.0.2.1", Now: time.Now(),
			})
			require.Error(t, err, kind)
			require.True(t, providers.IsSignatureError(err) || providers.IsPayloadError(err) || errors.Is(err, ses.ErrCertificate), "%s: %v", kind, err)
		}
	})
}
