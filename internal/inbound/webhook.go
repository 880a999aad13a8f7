package inbound

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// WebhookTolerance is how far the webhook-timestamp of a signed ingress
// request may be from the receiver's clock, either way, before the request is
// refused as a possible replay.
const WebhookTolerance = 5 * time.Minute

// Standard Webhooks header names, for callers that build or read requests.
const (
	HeaderWebhookID        = standardwebhooks.HeaderWebhookID
	HeaderWebhookTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderWebhookSignature = standardwebhooks.HeaderWebhookSignature
)

var (
	// ErrWebhookSecret means the configured secret is not a valid Standard
	// Webhooks secret ("whsec_" + base64). It is an operator error (500),
	// not the client's.
	ErrWebhookSecret = errors.New("invalid webhook secret")

	// ErrWebhookSignature means a header is missing or malformed or no
	// signature matches the body (401).
	ErrWebhookSignature = errors.New("invalid webhook signature")

	// ErrWebhookTimestamp means the webhook-timestamp is outside
	// WebhookTolerance of now (401). It also wraps ErrWebhookSignature, so
	// callers that don't care about the reason check for that one only.
	ErrWebhookTimestamp = fmt.Errorf("%w: timestamp outside tolerance", ErrWebhookSignature)
)

// WebhookVerifier checks Standard Webhooks signatures with one secret. Build
// it once at startup so a bad secret fails early; it is safe for concurrent
// use.
type WebhookVerifier struct {
	wh *standardwebhooks.Webhook
}

// NewWebhookVerifier builds a verifier for a "whsec_<base64>" secret (the
// prefix is optional), as INBOUND_WEBHOOK_SECRET holds it.
func NewWebhookVerifier(secret string) (*WebhookVerifier, error) {
	if strings.TrimPrefix(secret, "whsec_") == "" {
		return nil, fmt.Errorf("%w: empty", ErrWebhookSecret)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWebhookSecret, err)
	}
	return &WebhookVerifier{wh: wh}, nil
}

// Verify checks the webhook-id, webhook-timestamp and webhook-signature
// headers against body: the timestamp must be within WebhookTolerance of now
// and one of the space-separated "v1,<base64>" signatures must be the
// HMAC-SHA256 of "id.timestamp.body" (compared in constant time by the
// library). It returns nil or an error wrapping ErrWebhookSignature.
func (v *WebhookVerifier) Verify(headers http.Header, body []byte, now time.Time) error {
	if headers.Get(HeaderWebhookID) == "" || headers.Get(HeaderWebhookTimestamp) == "" || headers.Get(HeaderWebhookSignature) == "" {
		return fmt.Errorf("%w: missing %s, %s or %s header", ErrWebhookSignature,
			HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature)
	}

	// The library checks the timestamp against the wall clock; doing it here
	// against now keeps the check testable and the tolerance ours.
	secs, err := strconv.ParseInt(strings.TrimSpace(headers.Get(HeaderWebhookTimestamp)), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: malformed %s header", ErrWebhookSignature, HeaderWebhookTimestamp)
	}
	ts := time.Unix(secs, 0)
	if ts.Before(now.Add(-WebhookTolerance)) || ts.After(now.Add(WebhookTolerance)) {
		return fmt.Errorf("%w: %s is %s, now is %s", ErrWebhookTimestamp, HeaderWebhookTimestamp,
			ts.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}

	if err := v.wh.VerifyIgnoringTimestamp(body, headers); err != nil {
		return fmt.Errorf("%w: %w", ErrWebhookSignature, err)
	}
	return nil
}

// Sign returns a webhook-signature header value ("v1,<base64>") for body, for
// tests and tools that send signed ingress requests.
func (v *WebhookVerifier) Sign(id string, timestamp time.Time, body []byte) (string, error) {
	sig, err := v.wh.Sign(id, timestamp, body)
	if err != nil {
		return "", fmt.Errorf("error signing webhook: %w", err)
	}
	return sig, nil
}

// VerifyStandardWebhook verifies a signed email ingress request with secret;
// see WebhookVerifier.Verify. Prefer a WebhookVerifier built once at startup.
func VerifyStandardWebhook(secret string, headers http.Header, body []byte, now time.Time) error {
	v, err := NewWebhookVerifier(secret)
	if err != nil {
		return err
	}
	return v.Verify(headers, body, now)
}
