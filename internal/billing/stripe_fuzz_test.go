package billing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/mailwatch/mailwatch/internal/billing"
)

const fuzzSecret = "whsec_fuzz_5b2e8c1d9f3a4e6b7c8d9e0f1a2b3c4d"

// FuzzVerifyStripe feeds arbitrary Stripe-Signature headers and bodies to
// the verification: it must never panic, and never accept a header that
// was not made with the secret (the seeds include real signatures under
// other secrets, truncated ones and ones for another body).
func FuzzVerifyStripe(f *testing.F) {
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
	now := time.Now()
	other := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_other", Timestamp: now})
	f.Add(other.Header, body)
	f.Add(other.Header+",v1=", body)
	f.Add(fmt.Sprintf("t=%d,v1=%x", now.Unix(), webhook.ComputeSignature(now, []byte("{}"), fuzzSecret)), body)
	f.Add("t=,v1=zz", body)
	f.Add("t=99999999999999999999,v1=00", body)
	f.Add("v1=abc,v1=def,t=-1", []byte{})
	f.Add("t=1=2,v1", []byte("{"))
	f.Add(",,,,", []byte(nil))
	f.Fuzz(func(t *testing.T, header string, payload []byte) {
		if err := billing.VerifyStripe(payload, header, fuzzSecret, now); err == nil {
			t.Fatalf("accepted header %q for body %q without the secret", header, payload)
		}
		// Whatever the body, parsing it must not panic either.
		_, _ = billing.ParseEvent(payload)
	})
}

// TestVerifyStripeAcceptsTheSecret is the fuzz target's counterpart: a
// header made with the secret verifies, alone or among others.
func TestVerifyStripeAcceptsTheSecret(t *testing.T) {
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
	good := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: fuzzSecret})
	if err := billing.VerifyStripe(body, good.Header, fuzzSecret, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := billing.VerifyStripe(body, good.Header+",v1=00ff", fuzzSecret, time.Now()); err != nil {
		t.Fatal("a second, wrong v1 must not spoil a matching one:", err)
	}
	if err := billing.VerifyStripe(body, good.Header, "", time.Now()); err == nil {
		t.Fatal("no secret must accept nothing")
	}
	ev, err := billing.ParseEvent(body)
	if err != nil || ev.ID != "evt_1" || ev.Type != "invoice.paid" {
		t.Fatalf("ParseEvent: %+v, %v", ev, err)
	}
	for _, bad := range []string{`[]`, `{"object":"customer","id":"evt_1","type":"x","created":1}`, `{"object":"event","id":"cus_1","type":"x","created":1}`,
		`{"object":"event","id":"evt_1","type":"","created":1}`, `{"object":"event","id":"evt_1","type":"x","created":0}`} {
		if _, err := billing.ParseEvent([]byte(bad)); err == nil {
			t.Fatalf("ParseEvent accepted %s", bad)
		}
	}
}
