package esp_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/esp/mailgun"
	"github.com/mailwatch/mailwatch/internal/esp/postmark"
	"github.com/mailwatch/mailwatch/internal/esp/resend"
	"github.com/mailwatch/mailwatch/internal/esp/sendgrid"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
)

type want struct {
	id, msg, rcpt string
	typ           esp.Type
	bounce        string
}

// TestCorpusPayloads normalises every provider payload in the shared corpus
// and checks the events a reader of the provider's docs expects.
func TestCorpusPayloads(t *testing.T) {
	t.Parallel()
	sendgridParse := sendgrid.Parse
	resendParse := func(b []byte) ([]esp.Event, error) { return resend.Parse(b, "msg_test") }
	sesBare := ses.ParseNotification
	cases := []struct {
		file  string
		parse func([]byte) ([]esp.Event, error)
		want  []want
	}{
		{"sendgrid-dropped.json", sendgridParse, []want{{"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA", "LRzXl_NHStOGhQ4kofSm_A", "hello@world.com", esp.TypeSuppressed, ""}}},
		{"sendgrid-bounce.json", sendgridParse, []want{{"lC0Rc-FuQmKbnxCWxX1jRQ", "Lli-03HcQ5-JLybO9fXsJg", "noreply@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"sendgrid-blocked-no-status.json", sendgridParse, []want{{"Ym91bmNlLTQtNTA0ODUxOTUtZXVvMmlLeGRTYXlQRjRZRTQtLUk3QS0w", "euo2iKxdSayPF4YE4--I7A", "noemail@this.does.not.exist.tld", esp.TypeBounced, esp.BounceSoft}}},
		{"mailgun-permanent_failure.json", mailgun.Parse, []want{{"G9Bn5sl1TC6nu79C8C0bwg", "20130503192659.13651.20287@app.symfony.com", "alice@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"mailgun-permanent_failure_no_description.json", mailgun.Parse, []want{{"G9Bn5sl1TC6nu79C8C0bwg", "20130503192659.13651.20287@app.symfony.com", "alice@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"mailgun-temporary_failure.json", mailgun.Parse, []want{{"Fs7-5t81S2ispqxqDw2U4Q", "", "alice@example.com", esp.TypeDeferred, ""}}},
		{"mailgun-suppression_failure.json", mailgun.Parse, []want{{"G9Bn5sl1TC6nu79C8C0bwg", "", "alice@example.com", esp.TypeSuppressed, ""}}},
		{"mailgun-complained.json", mailgun.Parse, []want{{"-Agny091SquKnsrW2NEKUA", "", "alice@example.com", esp.TypeComplained, ""}}},
		{"mailgun-delivered.json", mailgun.Parse, []want{{"CPgfbmQMTCKtHW6uIWtuVe", "", "alice@example.com", esp.TypeDelivered, ""}}},
		{"postmark-bounce.json", postmark.Parse, []want{{"bounce/42", "00000000-0000-0000-0000-000000000000", "john@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"postmark-spam_complaint.json", postmark.Parse, []want{{"bounce/42", "00000000-0000-0000-0000-000000000000", "john@example.com", esp.TypeComplained, ""}}},
		{"postmark-delivery.json", postmark.Parse, []want{{"delivery/00000000-0000-0000-0000-000000000000/john@example.com", "00000000-0000-0000-0000-000000000000", "john@example.com", esp.TypeDelivered, ""}}},
		{"postmark-subscription_change.json", postmark.Parse, []want{{"subscription/00000000-0000-0000-0000-000000000000/john@example.com/2022-09-02T14:32:30Z", "00000000-0000-0000-0000-000000000000", "john@example.com", esp.TypeSuppressed, ""}}},
		{"resend-sent.json", resendParse, []want{{"msg_test", "172c41ce-ba6d-4281-8a7a-541faa725748", "test@example.com", esp.TypeSent, ""}}},
		{"resend-bounced.json", resendParse, []want{{"msg_test", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "bounced@resend.dev", esp.TypeBounced, esp.BounceHard}}},
		{"resend-bounced-suppressed.json", resendParse, []want{{"msg_test", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "blocked@example.org", esp.TypeSuppressed, ""}}},
		{"resend-complained.json", resendParse, []want{{"msg_test", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "complained@resend.dev", esp.TypeComplained, ""}}},
		{"ses-bounce.json", sesBare, []want{{"00000138111222aa-44455566-cccc-cccc-cccc-ddddaaaa068a-000000/jane@example.com", "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000", "jane@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"ses-complaint.json", sesBare, []want{{"000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000/richard@example.com", "000001378603177f-7a5433e7-8edb-42ae-af10-f0181f34d6ee-000000", "richard@example.com", esp.TypeComplained, ""}}},
		{"ses-delivery.json", sesBare, []want{{"0000014644fe5ef6-9a483358-9170-4cb4-a269-f5dcdf415321-000000/delivery/jane@example.com", "0000014644fe5ef6-9a483358-9170-4cb4-a269-f5dcdf415321-000000", "jane@example.com", esp.TypeDelivered, ""}}},
		{"ses-sns-notification-bounce.json", ses.Parse, []want{{"00000138111222aa-44455566-cccc-cccc-cccc-ddddaaaa068a-000000/jane@example.com", "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000", "jane@example.com", esp.TypeBounced, esp.BounceHard}}},
		{"ses-sns-subscription-confirmation.json", ses.Parse, nil},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			evs, err := tc.parse(corpus.Read(t, "esp/"+tc.file))
			require.NoError(t, err)
			require.Len(t, evs, len(tc.want))
			for i, w := range tc.want {
				e := evs[i]
				require.Equal(t, w.id, e.ID)
				if w.msg != "" {
					require.Equal(t, w.msg, e.MessageID)
				}
				require.Equal(t, w.rcpt, e.Recipient)
				require.Equal(t, w.typ, e.Type)
				require.Equal(t, w.bounce, e.Bounce)
				require.False(t, e.Timestamp.IsZero())
				require.NotEmpty(t, e.Classification)
			}
		})
	}
	// Every ESP payload in the corpus is covered (the signature vectors and
	// the non-ESP files are covered by their own tests).
	files, err := filepath.Glob(filepath.Join(filepath.Dir(corpus.Path(t, "esp/README.md")), "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		base := filepath.Base(f)
		switch base {
		case "sendgrid-signed-vector.json", "mailgun-signature-vector.json", "stripe-event.json", "twilio-signature-vector.json":
			continue
		}
		require.True(t, seen[base], "corpus file %s has no case", base)
	}
}

func TestSESMultiRecipientSplit(t *testing.T) {
	t.Parallel()
	msg := []byte(`{"notificationType":"Delivery","mail":{"messageId":"m1","destination":["a@x.com","B@y.com"]},
		"delivery":{"timestamp":"2024-01-01T00:00:00Z","recipients":["a@x.com","B@y.com"]}}`)
	evs, err := ses.ParseNotification(msg)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "m1/delivery/a@x.com", evs[0].ID)
	require.Equal(t, "m1/delivery/b@y.com", evs[1].ID)
	require.Equal(t, "B@y.com", evs[1].Recipient)
}

func TestDomain(t *testing.T) {
	t.Parallel()
	require.Equal(t, "example.com", esp.Domain("Ann@Example.COM"))
	require.Equal(t, "", esp.Domain("nobody"))
}
