// Package ses verifies Amazon SNS HTTP(S) notifications (the way SES
// publishes bounce, complaint and delivery notifications) and parses the
// SES notification inside them.
//
// SNS signs every message with RSA: SignatureVersion 1 is SHA1withRSA and
// 2 is SHA256withRSA over a canonical string of the message's fields
// ("Verifying the signatures of Amazon SNS messages" in the SNS developer
// guide). The signing certificate is fetched from SigningCertURL, which must
// be an HTTPS URL on sns.<region>.amazonaws.com; it is cached by URL.
package ses

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA.
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// SNS message types.
const (
	TypeNotification             = "Notification"
	TypeSubscriptionConfirmation = "SubscriptionConfirmation"
	TypeUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// Envelope is an SNS HTTP(S) message.
type Envelope struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	Token            string `json:"Token"`
	TopicArn         string `json:"TopicArn"`
	Subject          string `json:"Subject"`
	Message          string `json:"Message"`
	Timestamp        string `json:"Timestamp"`
	SignatureVersion string `json:"SignatureVersion"`
	Signature        string `json:"Signature"`
	SigningCertURL   string `json:"SigningCertURL"`
	SubscribeURL     string `json:"SubscribeURL"`
	UnsubscribeURL   string `json:"UnsubscribeURL"`
	// subjectSet records whether Subject was present (it is signed only
	// then).
	subjectSet bool
}

// ParseEnvelope decodes an SNS message (bounded).
func ParseEnvelope(body []byte) (*Envelope, error) {
	if len(body) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, esp.Errorf(esp.ErrPayload, "an SNS message is a JSON object")
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not an SNS message")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err == nil {
		_, env.subjectSet = fields["Subject"]
	}
	switch env.Type {
	case TypeNotification, TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation:
	default:
		return nil, esp.Errorf(esp.ErrPayload, "unknown SNS message Type")
	}
	if env.MessageID == "" || env.TopicArn == "" || env.Timestamp == "" {
		return nil, esp.Errorf(esp.ErrPayload, "SNS message lacks MessageId, TopicArn or Timestamp")
	}
	return &env, nil
}

// StringToSign builds the canonical string SNS signs for env's type.
func (env *Envelope) StringToSign() string {
	var b strings.Builder
	add := func(k, v string) {
		b.WriteString(k)
		b.WriteByte('\n')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	add("Message", env.Message)
	add("MessageId", env.MessageID)
	if env.Type == TypeNotification {
		if env.subjectSet && env.Subject != "" {
			add("Subject", env.Subject)
		}
	} else {
		add("SubscribeURL", env.SubscribeURL)
	}
	add("Timestamp", env.Timestamp)
	if env.Type != TypeNotification {
		add("Token", env.Token)
	}
	add("TopicArn", env.TopicArn)
	add("Type", env.Type)
	return b.String()
}

// SetSubject sets Subject as present (for tests that build envelopes).
func (env *Envelope) SetSubject(s string) { env.Subject, env.subjectSet = s, true }

var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]{1,30}\.amazonaws\.com(\.cn)?$`)

// CheckAWSURL checks that raw is an https URL on sns.<region>.amazonaws.com
// (the only hosts SNS serves certificates and confirmations from).
func CheckAWSURL(raw string) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, errors.New("URL too long")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Port() != "" || !snsHost.MatchString(u.Hostname()) {
		return nil, errors.New("not an https URL on sns.<region>.amazonaws.com")
	}
	return u, nil
}

// CertFetcher returns the certificate at an SNS SigningCertURL.
type CertFetcher interface {
	Certificate(ctx context.Context, certURL string) (*x509.Certificate, error)
}

// maxCertBytes bounds a fetched certificate file.
const maxCertBytes = 64 << 10

// maxCachedCerts bounds the cache (SNS uses a handful of certificates per
// region at a time).
const maxCachedCerts = 256

// HTTPCertFetcher fetches certificates over HTTPS with Client (which should
// be the SSRF-guarded client) and caches them by URL. The URL is checked
// with CheckAWSURL before any request.
type HTTPCertFetcher struct {
	Client *http.Client
	mu     sync.Mutex
	cache  map[string]*x509.Certificate
}

// Certificate implements CertFetcher.
func (f *HTTPCertFetcher) Certificate(ctx context.Context, certURL string) (*x509.Certificate, error) {
	u, err := CheckAWSURL(certURL)
	if err != nil {
		return nil, fmt.Errorf("SigningCertURL: %w", err)
	}
	if !strings.HasSuffix(u.Path, ".pem") {
		return nil, errors.New("SigningCertURL: not a .pem file")
	}
	key := u.String()
	f.mu.Lock()
	cert := f.cache[key]
	f.mu.Unlock()
	if cert != nil {
		return cert, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, err
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("error fetching SNS signing certificate: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("error fetching SNS signing certificate: HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("error reading SNS signing certificate: %w", err)
	}
	if len(raw) > maxCertBytes {
		return nil, errors.New("SNS signing certificate too large")
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("SNS signing certificate is not PEM")
	}
	cert, err = x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("error parsing SNS signing certificate: %w", err)
	}
	f.mu.Lock()
	if f.cache == nil || len(f.cache) >= maxCachedCerts {
		f.cache = map[string]*x509.Certificate{}
	}
	f.cache[key] = cert
	f.mu.Unlock()
	return cert, nil
}

// ErrCertificate means the signing certificate could not be obtained; the
// request should be retried by SNS (the caller's 503), not refused.
var ErrCertificate = errors.New("SNS signing certificate unavailable")

// Verify checks env's signature with the certificate from fetcher, that its
// TopicArn is one of topics, and its Timestamp's age (maxAge zero: off).
func Verify(ctx context.Context, env *Envelope, fetcher CertFetcher, topics []string, now time.Time, maxAge time.Duration) error {
	if !contains(topics, env.TopicArn) {
		return esp.Errorf(esp.ErrSignature, "TopicArn is not one of the provider's topic_arns")
	}
	var hash crypto.Hash
	switch env.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return esp.Errorf(esp.ErrSignature, "SignatureVersion must be 1 or 2")
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signature)
	if err != nil || len(sig) == 0 || len(sig) > 1024 {
		return esp.Errorf(esp.ErrSignature, "Signature is not base64")
	}
	if _, err := CheckAWSURL(env.SigningCertURL); err != nil {
		return esp.Errorf(esp.ErrSignature, "SigningCertURL: "+err.Error())
	}
	ts, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return esp.Errorf(esp.ErrSignature, "Timestamp is not RFC 3339")
	}
	cert, err := fetcher.Certificate(ctx, env.SigningCertURL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return esp.Errorf(esp.ErrSignature, "signing certificate has no RSA key")
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return esp.Errorf(esp.ErrSignature, "signing certificate is not valid now")
	}
	msg := []byte(env.StringToSign())
	var digest []byte
	if hash == crypto.SHA1 {
		d := sha1.Sum(msg) //nolint:gosec // SignatureVersion 1
		digest = d[:]
	} else {
		d := sha256.Sum256(msg)
		digest = d[:]
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest, sig); err != nil {
		return esp.Errorf(esp.ErrSignature, "SNS signature does not match")
	}
	return esp.CheckAge(ts, now, maxAge)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TopicARNPattern is what ValidTopicARN accepts, as a regular expression
// (the API's document carries it).
const TopicARNPattern = `^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{10,12}:[A-Za-z0-9_.-]{1,256}$`

var topicARN = regexp.MustCompile(TopicARNPattern)

// ValidTopicARN reports whether s looks like an SNS topic ARN.
func ValidTopicARN(s string) bool { return topicARN.MatchString(s) }

// awsOnly refuses any request that is not https to sns.<region>.amazonaws.com.
type awsOnly struct{ next http.RoundTripper }

func (a awsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, err := CheckAWSURL(r.URL.String()); err != nil {
		return nil, fmt.Errorf("refused outbound request: %w", err)
	}
	return a.next.RoundTrip(r)
}

// AWSOnlyClient wraps base (the SSRF-guarded client) so that it only ever
// requests sns.<region>.amazonaws.com over HTTPS: the certificate fetch and
// the subscription-confirm visit both go through it.
func AWSOnlyClient(base *http.Client) *http.Client {
	c := *base
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = awsOnly{next: next}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Confirm visits the SubscribeURL of a SubscriptionConfirmation with client
// (which should be AWSOnlyClient). It returns nil on a 2xx answer.
func Confirm(ctx context.Context, client *http.Client, env *Envelope) error {
	if env.Type != TypeSubscriptionConfirmation {
		return errors.New("not a SubscriptionConfirmation")
	}
	if _, err := CheckAWSURL(env.SubscribeURL); err != nil {
		return fmt.Errorf("SubscribeURL: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.SubscribeURL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("error confirming SNS subscription: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("error confirming SNS subscription: HTTP %d", resp.StatusCode)
	}
	return nil
}
