package channels

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailwatch/mailwatch/internal/webhook"
)

// MaxRetryAfter caps the wait a destination's Retry-After asks for.
const MaxRetryAfter = time.Hour

// maxErrorBody is how much of an error answer's body goes into last_error.
const maxErrorBody = 200

// Attempt is the outcome of one send.
type Attempt struct {
	// StatusCode is the HTTP status answered; 0 when there was no answer.
	StatusCode int
	Delivered  bool
	// Retryable: a 429, a 5xx, a network error or a key ring missing the
	// destination's key; anything else is final.
	Retryable bool
	// RetryAfter is the destination's Retry-After (capped at
	// MaxRetryAfter); 0 when it gave none.
	RetryAfter time.Duration
	// Error says what went wrong; "" when delivered.
	Error string
}

// post sends body to rawURL for a channel of kind, through the SSRF-guarded
// client, after checking the kind's hosts again (the allow-list may have
// changed since the channel was created).
func (s *Service) post(ctx context.Context, kind, rawURL string, body []byte, now time.Time) Attempt {
	if err := s.Hosts.Check(kind, rawURL); err != nil {
		return Attempt{Error: "destination refused: " + err.Error()}
	}
	if s.Client == nil {
		// Never a client without the SSRF guard.
		return Attempt{Retryable: true, Error: "no HTTP client is configured for notification channels"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return Attempt{Error: "invalid destination URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", webhook.DefaultUserAgent)
	resp, err := s.Client.Do(req)
	if err != nil {
		return Attempt{Retryable: true, Error: "request failed: " + redactURL(err, rawURL)}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	a := Attempt{StatusCode: resp.StatusCode}
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		a.Delivered = true
		return a
	}
	a.Error = kindTitles[kind] + " answered " + strconv.Itoa(code) + " " + http.StatusText(code)
	if text := cleanBody(answer); text != "" {
		a.Error += ": " + text
	}
	if code == http.StatusTooManyRequests || code >= 500 {
		a.Retryable = true
		a.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return a
}

// redactURL keeps the destination URL (a secret) out of an error message.
func redactURL(err error, rawURL string) string {
	return strings.ReplaceAll(err.Error(), rawURL, "the destination")
}

// cleanBody makes the start of an answer storable and readable: valid
// UTF-8, no NUL, one line, at most maxErrorBody bytes.
func cleanBody(b []byte) string {
	s := strings.ToValidUTF8(string(b), "")
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\x00", "")), " ")
	if len(s) > maxErrorBody {
		cut := maxErrorBody
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// RetryAfter is the wait a destination's Retry-After asks for
// (webhook.ParseRetryAfter: 0 when absent or invalid, at least 1 s
// otherwise), capped at MaxRetryAfter.
func RetryAfter(v string, now time.Time) time.Duration {
	return min(webhook.ParseRetryAfter(v, now), MaxRetryAfter)
}

// errorf builds an Attempt error for a failure before any request.
func errorf(retryable bool, format string, args ...any) Attempt {
	return Attempt{Retryable: retryable, Error: fmt.Sprintf(format, args...)}
}
