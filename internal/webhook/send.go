package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

// Error classes of an Attempt: short, stable values to store and to count in
// metrics. The empty class is success.
const (
	// ErrorClassHTTPStatus: the endpoint answered with a non-2xx, non-3xx
	// status.
	ErrorClassHTTPStatus = "http_status"
	// ErrorClassRedirect: the endpoint answered 3xx; redirects are not
	// followed.
	ErrorClassRedirect = "redirect"
	// ErrorClassTimeout: no complete answer within the client timeout (or
	// the context deadline).
	ErrorClassTimeout = "timeout"
	// ErrorClassConnectionRefused: nothing listens at the endpoint.
	ErrorClassConnectionRefused = "connection_refused"
	// ErrorClassConnectionReset: the connection was reset or closed before
	// an answer.
	ErrorClassConnectionReset = "connection_reset"
	// ErrorClassDNS: the endpoint's name did not resolve.
	ErrorClassDNS = "dns"
	// ErrorClassTLS: TLS handshake or certificate verification failed.
	ErrorClassTLS = "tls"
	// ErrorClassBlockedDestination: the endpoint resolved to an address the
	// guard refuses (netguard). Retrying will not help until the DNS or the
	// allow-list changes: fail at once.
	ErrorClassBlockedDestination = "blocked_destination"
	// ErrorClassCanceled: the caller's context was cancelled (worker
	// shutting down); the attempt says nothing about the endpoint and should
	// not count.
	ErrorClassCanceled = "canceled"
	// ErrorClassInvalidRequest: the request could not be built (bad URL or
	// secret); permanent.
	ErrorClassInvalidRequest = "invalid_request"
	// ErrorClassOther: anything else.
	ErrorClassOther = "other"
)

// Response capture bounds.
const (
	// MaxResponseBody is the number of bytes of the response body kept in
	// Attempt.ResponseBody.
	MaxResponseBody = 4 << 10

	// maxResponseDrain is how much more of the body is read and discarded so
	// the connection can be reused; beyond it the connection is closed.
	maxResponseDrain = 64 << 10

	// DefaultUserAgent is sent when Request.UserAgent is empty.
	DefaultUserAgent = "mailwatch"
)

// Request is one push attempt.
type Request struct {
	// URL is the endpoint, validated by netguard.Guard.CheckURL when the
	// subscription was saved.
	URL string
	// MsgID is the webhook-id header: the delivery's id, the same on every
	// attempt, so receivers can de-duplicate.
	MsgID string
	// Timestamp is the webhook-timestamp of this attempt (not the event
	// time: receivers reject timestamps outside a tolerance, 5 min by
	// default). Zero means now.
	Timestamp time.Time
	// Body is the stored payload (see Payload), sent byte for byte.
	Body []byte
	// Secret is the subscription's signing secret, "whsec_...", decrypted.
	Secret string
	// PreviousSecret, when set, is the secret a rotation replaced, still in
	// its grace period: the push then carries a signature under each
	// secret (SignAll), the new one first.
	PreviousSecret string
	// UserAgent defaults to DefaultUserAgent.
	UserAgent string
}

// Attempt is the outcome of one push, ready to be recorded.
type Attempt struct {
	// StatusCode is the HTTP status answered, 0 when there was no answer.
	StatusCode int
	// ErrorClass is "" on success, else one of the ErrorClass constants.
	ErrorClass string
	// Error describes the failure for humans; "" on success.
	Error string
	// Duration is the time from sending the request to the end of reading
	// the (bounded) response body.
	Duration time.Duration
	// ResponseBody is the start of the response body, at most
	// MaxResponseBody bytes, valid UTF-8 without NUL bytes (safe for a
	// Postgres text column).
	ResponseBody string
	// ResponseTruncated is true when the body was longer than what
	// ResponseBody holds.
	ResponseTruncated bool
	// RetryAfter is set (> 0) only on a 429 or 503 answer carrying a valid
	// Retry-After header (delay seconds or HTTP date); a value of 0 or a past
	// date gives 1 s. It is not capped: the caller decides how long it is
	// willing to wait.
	RetryAfter time.Duration
	// Delivered is true for a 2xx answer.
	Delivered bool
}

// Send performs one signed push of req.Body to req.URL with client (from
// NewClient) and reports the outcome. It never returns an error: every
// failure is described in the Attempt. ctx cancels the attempt; its deadline
// applies in addition to the client timeout.
func Send(ctx context.Context, client *http.Client, req Request) Attempt {
	httpReq, err := newRequest(ctx, req)
	if err != nil {
		return Attempt{ErrorClass: ErrorClassInvalidRequest, Error: err.Error()}
	}

	start := time.Now()
	resp, err := client.Do(httpReq)
	if err != nil {
		class, msg := classifyError(ctx, client, err)
		return Attempt{ErrorClass: class, Error: msg, Duration: time.Since(start)}
	}

	attempt := Attempt{StatusCode: resp.StatusCode}
	attempt.ResponseBody, attempt.ResponseTruncated = readBody(resp.Body)
	_ = resp.Body.Close()
	attempt.Duration = time.Since(start)

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		attempt.Delivered = true
	case code >= 300 && code < 400:
		attempt.ErrorClass = ErrorClassRedirect
		attempt.Error = fmt.Sprintf("endpoint answered %s", statusText(code))
		if loc := resp.Header.Get("Location"); loc != "" {
			attempt.Error += " to " + truncateString(loc, 512)
		}
		attempt.Error += "; redirects are not followed, update the subscription URL"
	default:
		attempt.ErrorClass = ErrorClassHTTPStatus
		attempt.Error = "endpoint answered " + statusText(code)
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			attempt.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return attempt
}

func newRequest(ctx context.Context, req Request) (*http.Request, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, fmt.Errorf("invalid endpoint URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("invalid endpoint URL: must be an absolute http or https URL")
	}
	timestamp := req.Timestamp
	if timestamp.IsZero() {
		timestamp = time.Now()
	}
	secrets := []string{req.Secret}
	if req.PreviousSecret != "" {
		secrets = append(secrets, req.PreviousSecret)
	}
	signature, err := SignAll(secrets, req.MsgID, timestamp, req.Body)
	if err != nil {
		return nil, fmt.Errorf("error signing: %w", err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("error building request: %w", err)
	}
	userAgent := req.UserAgent
	if userAgent == "" {
		userAgent = DefaultUserAgent
	}
	h := httpReq.Header
	h.Set("webhook-id", req.MsgID)
	h.Set("webhook-timestamp", strconv.FormatInt(timestamp.Unix(), 10))
	h.Set("webhook-signature", signature)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	return httpReq, nil
}

// readBody keeps the first MaxResponseBody bytes and drains up to
// maxResponseDrain more so the connection goes back to the pool. Read errors
// (a timeout mid-body) only shorten the capture: the status is what counts.
func readBody(body io.Reader) (string, bool) {
	buf, _ := io.ReadAll(io.LimitReader(body, MaxResponseBody+1))
	truncated := len(buf) > MaxResponseBody
	if truncated {
		buf = trimPartialRune(buf[:MaxResponseBody])
	}
	if n, _ := io.CopyN(io.Discard, body, maxResponseDrain); n > 0 {
		truncated = true
	}
	return sanitize(buf), truncated
}

// trimPartialRune drops a multi-byte UTF-8 sequence cut in half at the end
// of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// sanitize makes b storable as Postgres text: valid UTF-8, no NUL.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimPartialRune([]byte(s[:n]))) + "…"
}

func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return strconv.Itoa(code)
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3): delay
// seconds or an HTTP date, relative to now. It returns 0 when the value is
// absent or invalid and at least 1 s otherwise (a past date, or 0, means
// "now": one second). It is not capped; callers cap it to what they will
// wait. Webhook pushes and notification channels both read it here.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(365*24*time.Hour/time.Second) {
			secs = int64(365 * 24 * time.Hour / time.Second) // overflow guard: a year is "very long"
		}
		d = time.Duration(secs) * time.Second
	} else {
		t, err := http.ParseTime(v)
		if err != nil {
			return 0
		}
		d = t.Sub(now).Round(time.Second)
	}
	return max(d, time.Second)
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// classifyError maps a client.Do error to an error class and a message
// without the URL (already known to the reader).
func classifyError(ctx context.Context, client *http.Client, err error) (string, string) {
	msg := err.Error()
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		msg = urlErr.Err.Error()
	}

	var (
		blocked  *netguard.BlockedError
		dnsErr   *net.DNSError
		netErr   net.Error
		certErr  *tls.CertificateVerificationError
		alertErr tls.AlertError
		recErr   tls.RecordHeaderError
		authErr  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invErr   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &blocked):
		return ErrorClassBlockedDestination, blocked.Error() + " (webhooks go only to addresses reachable from the internet)"
	case errors.Is(ctx.Err(), context.Canceled):
		return ErrorClassCanceled, "attempt cancelled: " + msg
	case errors.As(err, &dnsErr):
		return ErrorClassDNS, "DNS lookup failed: " + dnsErr.Error()
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return ErrorClassTimeout, fmt.Sprintf("no complete response within %s: %s", client.Timeout, msg)
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorClassConnectionRefused, msg
	case errors.As(err, &certErr), errors.As(err, &alertErr), errors.As(err, &recErr),
		errors.As(err, &authErr), errors.As(err, &hostErr), errors.As(err, &invErr),
		strings.Contains(msg, "tls: "):
		return ErrorClassTLS, msg
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrorClassConnectionReset, msg
	default:
		return ErrorClassOther, msg
	}
}
