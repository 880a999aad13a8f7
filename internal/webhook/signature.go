package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// SecretPrefix starts every signing secret.
	SecretPrefix = "whsec_"

	// SecretSize is the number of random bytes in a generated secret.
	SecretSize = 32

	// MinSecretSize and MaxSecretSize bound the decoded key of a
	// user-supplied secret (Standard Webhooks recommends 24 to 64 bytes).
	MinSecretSize = 24
	MaxSecretSize = 64

	// signatureVersion is the Standard Webhooks scheme: HMAC-SHA256.
	signatureVersion = "v1"
)

// ErrInvalidSecret is matched (errors.Is) by every error of ValidateSecret.
var ErrInvalidSecret = errors.New("invalid signing secret")

// GenerateSecret returns a new signing secret: "whsec_" followed by the
// standard base64 of SecretSize random bytes.
func GenerateSecret() string {
	key := make([]byte, SecretSize)
	_, _ = rand.Read(key) // never fails since Go 1.24
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ValidateSecret checks a user-supplied signing secret: "whsec_" followed by
// canonical standard base64 (with padding) of 24 to 64 bytes. The error
// message is safe to show to the user and never echoes the secret.
func ValidateSecret(secret string) error {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return fmt.Errorf("%w: must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	if strings.ContainsAny(encoded, " \t\r\n") {
		return fmt.Errorf("%w: must not contain whitespace", ErrInvalidSecret)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(encoded)
	if err != nil {
		return fmt.Errorf("%w: the part after %q must be standard base64 (A-Z, a-z, 0-9, +, /, with = padding)", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < MinSecretSize || len(key) > MaxSecretSize {
		return fmt.Errorf("%w: must encode %d to %d bytes, got %d", ErrInvalidSecret, MinSecretSize, MaxSecretSize, len(key))
	}
	return nil
}

// secretKey returns the HMAC key of a secret. It is more lenient than
// ValidateSecret (any non-empty key), so a stored secret keeps signing even
// if validation rules tighten later.
func secretKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q prefix", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64", ErrInvalidSecret)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidSecret)
	}
	return key, nil
}

// Sign returns the webhook-signature header value for a message:
// "v1," + base64(HMAC-SHA256(key, msgID + "." + unix seconds + "." + body)).
// timestamp is truncated to whole seconds, as sent in webhook-timestamp.
func Sign(secret, msgID string, timestamp time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	if msgID == "" {
		return "", errors.New("empty message id")
	}
	return sign(key, msgID, timestamp.Unix(), body), nil
}

// SignAll returns the webhook-signature header value signed under each of
// secrets, space-separated in their order ("v1,<a> v1,<b>"): Standard
// Webhooks receivers accept a message when any one signature verifies, so
// during a rotation's grace period a receiver holding either secret
// accepts every push.
func SignAll(secrets []string, msgID string, timestamp time.Time, body []byte) (string, error) {
	if len(secrets) == 1 {
		return Sign(secrets[0], msgID, timestamp, body)
	}
	sigs := make([]string, len(secrets))
	for i, secret := range secrets {
		sig, err := Sign(secret, msgID, timestamp, body)
		if err != nil {
			return "", err
		}
		sigs[i] = sig
	}
	return strings.Join(sigs, " "), nil
}

func sign(key []byte, msgID string, unix int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, unix, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return signatureVersion + "," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
