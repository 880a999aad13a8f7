package billing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"
)

// SignatureTolerance is how old a Stripe-Signature timestamp may be
// (Stripe's own default).
const SignatureTolerance = 300 * time.Second

// MaxStripeHeaderBytes bounds the Stripe-Signature header read.
const MaxStripeHeaderBytes = 4096

// ErrSignature is a Stripe-Signature header that does not verify.
var ErrSignature = errors.New("invalid Stripe-Signature")

// VerifyStripe checks header (Stripe-Signature: t=...,v1=...[,v1=...])
// over payload under secret with stripe-go's webhook package: any of the
// v1 signatures may match (Stripe sends several while a secret rolls),
// and the timestamp may be at most SignatureTolerance old. The error says
// which part failed, in words fit for a 401's detail.
func VerifyStripe(payload []byte, header, secret string) error {
	if secret == "" {
		return fmt.Errorf("%w: no secret configured", ErrSignature)
	}
	if len(header) > MaxStripeHeaderBytes {
		return fmt.Errorf("%w: header longer than %d bytes", ErrSignature, MaxStripeHeaderBytes)
	}
	err := webhook.ValidatePayloadWithTolerance(payload, header, secret, SignatureTolerance)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhook.ErrNotSigned):
		return fmt.Errorf("%w: the Stripe-Signature header is missing", ErrSignature)
	case errors.Is(err, webhook.ErrInvalidHeader):
		return fmt.Errorf("%w: the Stripe-Signature header is malformed (expected t=<unix seconds>,v1=<hex>)", ErrSignature)
	case errors.Is(err, webhook.ErrTooOld):
		return fmt.Errorf("%w: the signature timestamp is more than %d seconds old", ErrSignature, int(SignatureTolerance.Seconds()))
	default:
		return fmt.Errorf("%w: no v1 signature matches the body under STRIPE_WEBHOOK_SECRET", ErrSignature)
	}
}

// Event is the part of a Stripe event object mailwatch reads
// (https://docs.stripe.com/api/events/object).
type Event struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// CreatedAt is the event's creation time.
func (e *Event) CreatedAt() time.Time { return time.Unix(e.Created, 0).UTC() }

// ParseEvent reads a verified webhook body. It checks only what storage
// needs (an evt_ id, a type, a creation time); the job reads data.object.
func ParseEvent(payload []byte) (*Event, error) {
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&ev); err != nil {
		return nil, errors.New("the body is not a Stripe event object (JSON)")
	}
	switch {
	case ev.Object != "event":
		return nil, errors.New(`the body is not a Stripe event object ("object" is not "event")`)
	case !strings.HasPrefix(ev.ID, "evt_") || len(ev.ID) > 255:
		return nil, errors.New(`the event has no "id" starting evt_`)
	case ev.Type == "" || len(ev.Type) > 255:
		return nil, errors.New(`the event has no "type"`)
	case ev.Created <= 0:
		return nil, errors.New(`the event has no "created" time`)
	}
	return &ev, nil
}

// expandable is a Stripe field that is an id or, when expanded, an object
// with an id.
type expandable string

func (x *expandable) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*x = expandable(o.ID)
		return nil
	}
	if string(b) == "null" {
		*x = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*x = expandable(s)
	return nil
}

// checkoutSession is https://docs.stripe.com/api/checkout/sessions/object.
type checkoutSession struct {
	ID                string     `json:"id"`
	ClientReferenceID string     `json:"client_reference_id"`
	Customer          expandable `json:"customer"`
	Subscription      expandable `json:"subscription"`
	Mode              string     `json:"mode"`
}

// subscription is https://docs.stripe.com/api/subscriptions/object.
type subscription struct {
	ID       string            `json:"id"`
	Customer expandable        `json:"customer"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
	Items    struct {
		Data []struct {
			Price struct {
				ID string `json:"id"`
			} `json:"price"`
		} `json:"data"`
	} `json:"items"`
}

// priceID is the subscription's first item's price.
func (s *subscription) priceID() string {
	for _, it := range s.Items.Data {
		if it.Price.ID != "" {
			return it.Price.ID
		}
	}
	return ""
}

// invoice is https://docs.stripe.com/api/invoices/object.
type invoice struct {
	ID           string     `json:"id"`
	Customer     expandable `json:"customer"`
	AmountDue    int64      `json:"amount_due"`
	Currency     string     `json:"currency"`
	AttemptCount int64      `json:"attempt_count"`
}

// entitled reports whether a subscription in Stripe status st grants its
// plan. past_due still does: mailwatch's own grace period (started by
// invoice.payment_failed) decides when a failed payment downgrades.
func entitled(st string) bool {
	return st == "active" || st == "trialing" || st == "past_due"
}
