// Package mailgun verifies and parses Mailgun's webhooks (the JSON form
// with "signature" and "event-data"): the signature is the hex HMAC-SHA256,
// under the account's HTTP webhook signing key, of the timestamp followed by
// the token, as Mailgun's "Securing Webhooks" documentation specifies. The
// signature does not cover the body, so a token must never be accepted
// twice with a different body (the caller stores tokens).
package mailgun

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// Signature is the "signature" object of a webhook body.
type Signature struct {
	Timestamp string `json:"timestamp"`
	Token     string `json:"token"`
	Signature string `json:"signature"`
}

// Payload is a Mailgun webhook body.
type Payload struct {
	Signature Signature `json:"signature"`
	EventData eventData `json:"event-data"`
}

type eventData struct {
	ID        string      `json:"id"`
	Timestamp json.Number `json:"timestamp"`
	Event     string      `json:"event"`
	Severity  string      `json:"severity"`
	Reason    string      `json:"reason"`
	Recipient string      `json:"recipient"`
	Envelope  struct {
		Sender string `json:"sender"`
	} `json:"envelope"`
	DeliveryStatus struct {
		Code         json.Number `json:"code"`
		EnhancedCode string      `json:"enhanced-code"`
		Message      string      `json:"message"`
		Description  string      `json:"description"`
	} `json:"delivery-status"`
	Message struct {
		Headers struct {
			MessageID string `json:"message-id"`
		} `json:"headers"`
	} `json:"message"`
}

// ParsePayload decodes a webhook body (bounded).
func ParsePayload(body []byte) (*Payload, error) {
	if len(body) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, esp.Errorf(esp.ErrPayload, "a Mailgun webhook body is a JSON object")
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not a Mailgun webhook body")
	}
	return &p, nil
}

// ParseSignature checks the shape of the signature object and returns its
// timestamp.
func ParseSignature(s Signature) (time.Time, []byte, error) {
	if s.Timestamp == "" || s.Token == "" || s.Signature == "" {
		return time.Time{}, nil, esp.Errorf(esp.ErrSignature, "signature.timestamp, token and signature are required")
	}
	if len(s.Timestamp) > 20 || len(s.Token) > 256 || len(s.Signature) != 64 {
		return time.Time{}, nil, esp.Errorf(esp.ErrSignature, "malformed signature object")
	}
	secs, err := strconv.ParseInt(s.Timestamp, 10, 64)
	if err != nil {
		return time.Time{}, nil, esp.Errorf(esp.ErrSignature, "signature.timestamp is not Unix seconds")
	}
	mac, err := hex.DecodeString(s.Signature)
	if err != nil {
		return time.Time{}, nil, esp.Errorf(esp.ErrSignature, "signature.signature is not hex")
	}
	return time.Unix(secs, 0).UTC(), mac, nil
}

// Verify checks the signature object with signingKey (constant time) and
// the timestamp's age (maxAge zero: no age check).
func Verify(signingKey string, s Signature, now time.Time, maxAge time.Duration) error {
	ts, got, err := ParseSignature(s)
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, []byte(signingKey))
	m.Write([]byte(s.Timestamp))
	m.Write([]byte(s.Token))
	if !hmac.Equal(got, m.Sum(nil)) {
		return esp.Errorf(esp.ErrSignature, "HMAC does not match")
	}
	return esp.CheckAge(ts, now, maxAge)
}

// Events normalises the payload's event. Engagement events (opened,
// clicked) and unknown ones give none.
func (p *Payload) Events() ([]esp.Event, error) {
	d := p.EventData
	e := esp.Event{
		ID: d.ID, Sender: d.Envelope.Sender, MessageID: strings.Trim(d.Message.Headers.MessageID, "<>"), Recipient: d.Recipient,
		Timestamp: esp.UnixSeconds(d.Timestamp), Classification: esp.Join(d.Event, d.Severity, d.Reason),
	}
	e.Detail = d.DeliveryStatus.Description
	if e.Detail == "" {
		e.Detail = d.DeliveryStatus.Message
	}
	switch d.Event {
	case "accepted":
		e.Type = esp.TypeSent
	case "delivered":
		e.Type = esp.TypeDelivered
	case "failed":
		switch {
		case strings.HasPrefix(d.Reason, "suppress-"):
			// Mailgun refused to send to an address on its own suppression
			// lists (suppress-bounce, suppress-unsubscribe, suppress-complaint).
			e.Type = esp.TypeSuppressed
		case d.Severity == "temporary":
			e.Type = esp.TypeDeferred
		default:
			e.Type, e.Bounce = esp.TypeBounced, esp.BounceHard
		}
	case "complained":
		e.Type = esp.TypeComplained
	case "unsubscribed":
		e.Type = esp.TypeUnsubscribed
	default:
		return nil, nil
	}
	return esp.Finish([]esp.Event{e})
}

// Parse decodes body and normalises its event (no signature check).
func Parse(body []byte) ([]esp.Event, error) {
	p, err := ParsePayload(body)
	if err != nil {
		return nil, err
	}
	return p.Events()
}
