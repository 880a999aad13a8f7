package billing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// SignatureTolerance is how old a Stripe-Signature timestamp may be
// (Stripe's own default).
const SignatureTolerance = 300 * time.Second

// MaxClockSkew is how far ahead of this server's clock a Stripe-Signature
// timestamp may be. stripe-go's tolerance bounds only the past side (a
// signature from an hour ahead passes it); a timestamp in the future can
// only be a clock out of step, so a small allowance covers that and no
// more.
const MaxClockSkew = 5 * time.Minute

// MaxStripeHeaderBytes bounds the Stripe-Signature header read.
const MaxStripeHeaderBytes = 4096

// ErrSignature is a Stripe-Signature header that does not verify.
var ErrSignature = errors.New("invalid Stripe-Signature")

// VerifyStripe checks header (Stripe-Signature: t=...,v1=...[,v1=...])
// over payload under secret with stripe-go's webhook package: any of the
// v1 signatures may match (Stripe sends several while a secret rolls).
// The signed timestamp must then be at most SignatureTolerance before now
// and at most MaxClockSkew after it. The error says which part failed, in
// words fit for a 401's detail.
func VerifyStripe(payload []byte, header, secret string, now time.Time) error {
	if secret == "" {
		return fmt.Errorf("%w: no secret configured", ErrSignature)
	}
	if len(header) > MaxStripeHeaderBytes {
		return fmt.Errorf("%w: header longer than %d bytes", ErrSignature, MaxStripeHeaderBytes)
	}
	err := webhook.ValidatePayloadIgnoringTolerance(payload, header, secret)
	switch {
	case err == nil:
	case errors.Is(err, webhook.ErrNotSigned):
		return fmt.Errorf("%w: the Stripe-Signature header is missing", ErrSignature)
	case errors.Is(err, webhook.ErrInvalidHeader):
		return fmt.Errorf("%w: the Stripe-Signature header is malformed (expected t=<unix seconds>,v1=<hex>)", ErrSignature)
	default:
		return fmt.Errorf("%w: no v1 signature matches the body under STRIPE_WEBHOOK_SECRET", ErrSignature)
	}
	at := signedAt(header)
	switch {
	case now.Sub(at) > SignatureTolerance:
		return fmt.Errorf("%w: the signature timestamp is more than %d seconds old", ErrSignature, int(SignatureTolerance.Seconds()))
	case at.Sub(now) > MaxClockSkew:
		return fmt.Errorf("%w: the signature timestamp is more than %d seconds ahead of this server's clock", ErrSignature, int(MaxClockSkew.Seconds()))
	}
	return nil
}

// signedAt returns the timestamp a verified header was signed with: as
// stripe-go reads it, the last t= pair.
func signedAt(header string) time.Time {
	var at time.Time
	for _, pair := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
				at = time.Unix(secs, 0)
			}
		}
	}
	return at
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
// needs (an evt_ id and a type Postgres can store, a creation time); the
// job reads data.object.
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
	for _, f := range []struct{ name, v string }{{"id", ev.ID}, {"type", ev.Type}} {
		if err := pgtext.Check(f.v); err != nil {
			return nil, fmt.Errorf("the event's %q %w", f.name, err)
		}
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

// storable reports whether every string read from data.object can be
// written to (or looked up in) a text column; an object that holds one
// that cannot is OutcomeInvalid, not a job that fails until discarded.
func storable(ss ...string) bool {
	for _, s := range ss {
		if pgtext.Check(s) != nil {
			return false
		}
	}
	return true
}

// entitled reports whether a subscription in Stripe status st grants its
// plan. past_due still does: mailwatch's own grace period (started by
// invoice.payment_failed) decides when a failed payment downgrades.
func entitled(st string) bool {
	return st == "active" || st == "trialing" || st == "past_due"
}
