// Package sendgrid verifies and parses SendGrid's Event Webhook: a JSON
// array of events, signed with ECDSA P-256 over SHA-256 of the timestamp
// header followed by the raw body, as SendGrid's "Signed Event Webhook"
// documentation and its own helper libraries specify.
package sendgrid

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// Header names of the signed Event Webhook.
const (
	HeaderSignature = "X-Twilio-Email-Event-Webhook-Signature"
	HeaderTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// maxSignatureLength bounds the base64 signature header (a DER P-256
// signature is at most 72 bytes).
const maxSignatureLength = 256

// ParsePublicKey decodes the verification key as SendGrid shows it: base64
// of a DER SubjectPublicKeyInfo holding a P-256 key.
func ParsePublicKey(b64 string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "public_key must be standard base64 of a DER public key")
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "public_key is not a DER public key")
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, esp.Errorf(esp.ErrPayload, "public_key must be an ECDSA P-256 key")
	}
	return ec, nil
}

// ParseSignatureHeaders decodes the signature and timestamp headers.
func ParseSignatureHeaders(signature, timestamp string) (sig []byte, ts time.Time, err error) {
	signature, timestamp = strings.TrimSpace(signature), strings.TrimSpace(timestamp)
	if signature == "" || timestamp == "" {
		return nil, time.Time{}, esp.Errorf(esp.ErrSignature, "missing "+HeaderSignature+" or "+HeaderTimestamp)
	}
	if len(signature) > maxSignatureLength || len(timestamp) > 20 {
		return nil, time.Time{}, esp.Errorf(esp.ErrSignature, "signature headers too long")
	}
	sig, err = base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return nil, time.Time{}, esp.Errorf(esp.ErrSignature, "signature is not base64")
	}
	secs, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return nil, time.Time{}, esp.Errorf(esp.ErrSignature, "timestamp is not Unix seconds")
	}
	return sig, time.Unix(secs, 0).UTC(), nil
}

// Verify checks the signature of body. The timestamp header's exact text is
// what was signed. maxAge zero skips the age check.
func Verify(key *ecdsa.PublicKey, signature, timestamp string, body []byte, now time.Time, maxAge time.Duration) error {
	sig, ts, err := ParseSignatureHeaders(signature, timestamp)
	if err != nil {
		return err
	}
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write(body)
	if !ecdsa.VerifyASN1(key, h.Sum(nil), sig) {
		return esp.Errorf(esp.ErrSignature, "ECDSA signature does not match")
	}
	return esp.CheckAge(ts, now, maxAge)
}

// event is the part of a SendGrid event we read.
type event struct {
	Email          string      `json:"email"`
	Event          string      `json:"event"`
	Timestamp      json.Number `json:"timestamp"`
	SGEventID      string      `json:"sg_event_id"`
	SGMessageID    string      `json:"sg_message_id"`
	SMTPID         string      `json:"smtp-id"`
	Type           string      `json:"type"`
	Status         string      `json:"status"`
	Reason         string      `json:"reason"`
	Response       string      `json:"response"`
	Classification string      `json:"bounce_classification"`
}

// Parse splits a SendGrid Event Webhook body into per-recipient events.
// Engagement events (open, click) and unknown ones are skipped.
func Parse(body []byte) ([]esp.Event, error) {
	if len(body) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '[' {
		return nil, esp.Errorf(esp.ErrPayload, "a SendGrid Event Webhook body is a JSON array")
	}
	var raw []event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not a JSON array of SendGrid events")
	}
	if len(raw) > esp.MaxEventsPerPayload {
		return nil, esp.Errorf(esp.ErrPayload, "too many events in one payload")
	}
	out := make([]esp.Event, 0, len(raw))
	for _, r := range raw {
		e, ok := normalise(r)
		if ok {
			out = append(out, e)
		}
	}
	return esp.Finish(out)
}

func normalise(r event) (esp.Event, bool) {
	e := esp.Event{
		ID: r.SGEventID, MessageID: messageID(r), Recipient: r.Email,
		Timestamp: esp.UnixSeconds(r.Timestamp), Classification: r.Event,
	}
	detail := r.Reason
	if detail == "" {
		detail = r.Response
	}
	e.Detail = detail
	switch r.Event {
	case "processed":
		e.Type = esp.TypeSent
	case "delivered":
		e.Type = esp.TypeDelivered
	case "deferred":
		e.Type = esp.TypeDeferred
	case "bounce":
		e.Type = esp.TypeBounced
		// type "blocked" is a temporary refusal by the receiver (soft);
		// type "bounce" (or none, in older payloads) is a permanent one.
		e.Bounce = esp.BounceHard
		if r.Type == "blocked" || strings.HasPrefix(r.Status, "4") {
			e.Bounce = esp.BounceSoft
		}
		e.Classification = esp.Join("bounce", r.Type, r.Status, r.Classification)
	case "dropped":
		// SendGrid did not send: the address is on its suppression lists
		// (or the message was invalid). Never counted as a bounce.
		e.Type = esp.TypeSuppressed
		e.Classification = esp.Join("dropped", r.Reason)
	case "spamreport":
		e.Type = esp.TypeComplained
	case "unsubscribe", "group_unsubscribe":
		e.Type = esp.TypeUnsubscribed
	default:
		return e, false
	}
	if e.ID == "" {
		// Older payloads lack sg_event_id; fall back to a stable composite.
		e.ID = strings.Join([]string{r.SGMessageID, r.Event, r.Email, r.Timestamp.String()}, "/")
	}
	return e, true
}

func messageID(r event) string {
	if r.SGMessageID != "" {
		// sg_message_id is "<x-message-id>.<filter...>"; the part before the
		// first dot is what the send API returned.
		if i := strings.IndexByte(r.SGMessageID, '.'); i > 0 {
			return r.SGMessageID[:i]
		}
		return r.SGMessageID
	}
	return strings.Trim(r.SMTPID, "<>")
}
