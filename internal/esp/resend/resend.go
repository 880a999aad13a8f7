// Package resend verifies and parses Resend's webhooks. Resend signs through
// Svix: headers svix-id, svix-timestamp and svix-signature carry the same
// scheme as Standard Webhooks (space-separated "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" under the whsec_ secret), so the Standard Webhooks
// library verifies them once the headers are renamed.
package resend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// Svix header names.
const (
	HeaderID        = "svix-id"
	HeaderTimestamp = "svix-timestamp"
	HeaderSignature = "svix-signature"
)

// Headers are the Svix headers of one request.
type Headers struct {
	ID, Timestamp, Signature string
}

// ParseHeaders checks the Svix headers' shape and returns the timestamp.
func ParseHeaders(h Headers) (time.Time, error) {
	if h.ID == "" || h.Timestamp == "" || h.Signature == "" {
		return time.Time{}, esp.Errorf(esp.ErrSignature, "missing svix-id, svix-timestamp or svix-signature")
	}
	if len(h.ID) > 256 || len(h.Timestamp) > 20 || len(h.Signature) > 4096 {
		return time.Time{}, esp.Errorf(esp.ErrSignature, "svix headers too long")
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(h.Timestamp), 10, 64)
	if err != nil {
		return time.Time{}, esp.Errorf(esp.ErrSignature, "svix-timestamp is not Unix seconds")
	}
	if !strings.Contains(h.Signature, "v1,") {
		return time.Time{}, esp.Errorf(esp.ErrSignature, "svix-signature has no v1 signature")
	}
	return time.Unix(secs, 0).UTC(), nil
}

// ValidateSecret checks a signing secret ("whsec_" + base64).
func ValidateSecret(secret string) error {
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 16 {
		return esp.Errorf(esp.ErrPayload, "signing_secret must be the whsec_... secret Resend shows")
	}
	if _, err := standardwebhooks.NewWebhook(secret); err != nil {
		return esp.Errorf(esp.ErrPayload, "signing_secret must be whsec_ followed by base64")
	}
	return nil
}

// Verify checks the Svix signature of body under secret; maxAge zero skips
// the age check (the library's own 5-minute check is not used, so the
// window is ours).
func Verify(secret string, h Headers, body []byte, now time.Time, maxAge time.Duration) error {
	ts, err := ParseHeaders(h)
	if err != nil {
		return err
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return esp.Errorf(esp.ErrSignature, "unusable signing secret")
	}
	hdr := http.Header{}
	hdr.Set(standardwebhooks.HeaderWebhookID, h.ID)
	hdr.Set(standardwebhooks.HeaderWebhookTimestamp, strings.TrimSpace(h.Timestamp))
	hdr.Set(standardwebhooks.HeaderWebhookSignature, h.Signature)
	if err := wh.VerifyIgnoringTimestamp(body, hdr); err != nil {
		return esp.Errorf(esp.ErrSignature, "Svix signature does not match")
	}
	return esp.CheckAge(ts, now, maxAge)
}

type payload struct {
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	Data      struct {
		EmailID   string          `json:"email_id"`
		From      string          `json:"from"`
		CreatedAt time.Time       `json:"created_at"`
		To        json.RawMessage `json:"to"`
		Bounce    *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			SubType string `json:"subType"`
		} `json:"bounce"`
	} `json:"data"`
}

// Parse normalises one Resend webhook body into an event per recipient.
// eventID is the svix-id of the request (the provider's event id); when
// empty a composite of the email id, type and time is used.
func Parse(body []byte, eventID string) ([]esp.Event, error) {
	if len(body) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, esp.Errorf(esp.ErrPayload, "a Resend webhook body is a JSON object")
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not a Resend webhook body")
	}
	var to []string
	if len(p.Data.To) > 0 && p.Data.To[0] == '"' {
		var one string
		if err := json.Unmarshal(p.Data.To, &one); err != nil {
			return nil, esp.Errorf(esp.ErrPayload, "data.to must be a string or an array of strings")
		}
		to = []string{one}
	} else if len(p.Data.To) > 0 && string(p.Data.To) != "null" {
		if err := json.Unmarshal(p.Data.To, &to); err != nil {
			return nil, esp.Errorf(esp.ErrPayload, "data.to must be a string or an array of strings")
		}
	}
	if len(to) > esp.MaxEventsPerPayload {
		return nil, esp.Errorf(esp.ErrPayload, "too many recipients")
	}
	base := esp.Event{Sender: p.Data.From, MessageID: p.Data.EmailID, Timestamp: p.CreatedAt, Classification: p.Type}
	if base.Timestamp.IsZero() {
		base.Timestamp = p.Data.CreatedAt
	}
	switch p.Type {
	case "email.sent":
		base.Type = esp.TypeSent
	case "email.delivered":
		base.Type = esp.TypeDelivered
	case "email.delivery_delayed":
		base.Type = esp.TypeDeferred
	case "email.complained":
		base.Type = esp.TypeComplained
	case "email.bounced":
		base.Type, base.Bounce = esp.TypeBounced, esp.BounceHard
		if b := p.Data.Bounce; b != nil {
			base.Detail = b.Message
			base.Classification = esp.Join(p.Type, b.Type, b.SubType)
			switch {
			case strings.EqualFold(b.SubType, "suppressed") || strings.Contains(b.Message, "suppression list"):
				// Resend refused to send to an address on its account-level
				// suppression list; it "does not count toward your bounce
				// rate", so it is no bounce here either.
				base.Type, base.Bounce = esp.TypeSuppressed, ""
			case strings.EqualFold(b.Type, "transient") || strings.EqualFold(b.Type, "undetermined"):
				base.Bounce = esp.BounceSoft
			}
		}
	default:
		return nil, nil
	}
	if eventID == "" {
		eventID = esp.Join(p.Data.EmailID, p.Type, base.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	out := make([]esp.Event, 0, len(to))
	for _, rcpt := range to {
		e := base
		e.Recipient = rcpt
		e.ID = eventID
		if len(to) > 1 {
			e.ID = eventID + "/" + strings.ToLower(rcpt)
		}
		out = append(out, e)
	}
	return esp.Finish(out)
}
