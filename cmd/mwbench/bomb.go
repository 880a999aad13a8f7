package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
)

// The bombs of issue 23's probe: a double-gzip body to sign-up that decodes
// to 1 GiB (1,794 bytes from the probe's compressor, about 4 KB from Go's;
// there it took the API from 823 to 3,950 MiB), and a single-gzip body that
// decodes to 200 MiB to the unauthenticated routes that read a body (+285 to
// 890 MiB each).
const (
	bombDoubleDecoded = 1 << 30
	bombSingleDecoded = 200 << 20
	bombBaselineRound = 50
)

// bombRoute is an unauthenticated route that reads a body, with the small,
// refused body of the baseline.
type bombRoute struct {
	path, contentType, plain string
}

// benchBomb starts a real `mailwatch api` with every ingress configured,
// measures its peak RSS (VmHWM) after start and after rounds of plain small
// requests to the routes (the baseline), then sends the bombs and reads the
// peak again after each: a body with a content coding is refused before it
// is read, so the peak stays at the baseline.
func benchBomb(ctx context.Context, env *benchEnv) error {
	bin, cleanup, err := mailwatchBin(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	api, err := startAPI(ctx, bin, env,
		"RATE_LIMIT_PER_MINUTE=100000",
		"INGRESS_RATE_LIMIT_PER_MINUTE=100000",
		// Every ingress configured, so that each route reads its body.
		"INBOUND_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"TWILIO_AUTH_TOKEN=bench-twilio-token",
		"STRIPE_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"LOG_LEVEL=error",
	)
	if err != nil {
		return err
	}
	defer api.Stop()
	pid := api.Pid
	peak := func() (int64, error) { return peakRSSMiB(pid) }
	started, err := peak()
	if err != nil {
		return err
	}

	routes := bombRoutes()
	s := &bombSender{ctx: ctx, base: api.Base, client: &http.Client{Timeout: 5 * time.Minute}}

	// Baseline: the same routes with plain small bodies, which each refuses
	// (no signature, no such token, no such provider).
	statuses := map[int]int{}
	for range bombBaselineRound {
		for _, r := range routes {
			status, _, err := s.send(r.path, r.contentType, "", []byte(r.plain))
			if err != nil {
				return err
			}
			statuses[status]++
		}
	}
	baseline, err := peak()
	if err != nil {
		return err
	}
	fmt.Printf("`mailwatch api` (pid %d): peak RSS (VmHWM) %d MiB after start; %d MiB after %d plain small requests to %d routes (baseline; answers %v)\n",
		pid, started, baseline, bombBaselineRound*len(routes), len(routes), statuses)

	if err := sendBombs(s, routes, pid, baseline); err != nil {
		return err
	}
	final, err := peak()
	if err != nil {
		return err
	}
	fmt.Printf("peak RSS (VmHWM): %d MiB after the bombs against %d MiB after the baseline (+%d MiB)\n", final, baseline, final-baseline)
	return nil
}

// mailwatchBin returns MAILWATCH_BIN, or else a freshly built mailwatch
// and the cleanup that removes it.
func mailwatchBin(ctx context.Context) (string, func(), error) {
	if bin := os.Getenv("MAILWATCH_BIN"); bin != "" {
		return bin, func() {}, nil
	}
	return buildMailwatch(ctx)
}

// peakRSSMiB is the process's peak RSS (VmHWM) in MiB.
func peakRSSMiB(pid int) (int64, error) {
	kb, err := procStatusKB(pid, "VmHWM")
	return kb / 1024, err
}

// bombRoutes are the unauthenticated routes that read a body.
func bombRoutes() []bombRoute {
	return []bombRoute{
		{"/api/accounts", "application/json", `{}`},
		{"/api/auth/token", "application/json", `{"email":"nobody"}`},
		{"/api/notification-addresses/verify", "application/json", `{"token":"x"}`},
		{"/api/webhooks/payments/stripe", "application/json", `{"id":"evt_1"}`},
		{"/api/webhooks/sms", "application/x-www-form-urlencoded", "From=%2B15555550100&Body=hi"},
		{"/api/webhooks/email?to=nobody", "message/rfc822", "Subject: hi\r\n\r\nhello\r\n"},
		{"/api/webhooks/auth/" + uuid.NewString(), "application/json", `{"type":"user.created"}`},
		{"/api/webhooks/providers/" + uuid.NewString(), "application/json", `[]`},
		{"/api/webhooks/tlsrpt/bench", "application/tlsrpt+json", `{}`},
	}
}

// bombSender posts bodies to the API at base.
type bombSender struct {
	ctx    context.Context
	base   string
	client *http.Client
}

// send posts body to path with the content type and, if set, the content
// coding, and returns the status and the time to the end of the answer.
func (s *bombSender) send(path, contentType, coding string, body []byte) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(s.ctx, "POST", s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	if coding != "" {
		req.Header.Set("Content-Encoding", coding)
	}
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, time.Since(t0), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(t0), nil
}

// sendBombs sends the double-gzip bomb to sign-up, then the single-gzip
// one to every route, printing the peak RSS of process pid after each.
func sendBombs(s *bombSender, routes []bombRoute, pid int, baseline int64) error {
	double, err := zeroGzip(bombDoubleDecoded, 2)
	if err != nil {
		return err
	}
	single, err := zeroGzip(bombSingleDecoded, 1)
	if err != nil {
		return err
	}
	status, took, err := s.send("/api/accounts", "application/json", "gzip, gzip", double)
	if err != nil {
		return err
	}
	after, err := peakRSSMiB(pid)
	if err != nil {
		return err
	}
	fmt.Printf("double-gzip bomb, %d bytes (%d MiB decoded), POST /api/accounts: %d in %s; peak RSS %d MiB (baseline %d MiB)\n",
		len(double), bombDoubleDecoded>>20, status, took.Round(time.Millisecond), after, baseline)
	for _, r := range routes {
		status, took, err := s.send(r.path, r.contentType, "gzip", single)
		if err != nil {
			return err
		}
		after, err := peakRSSMiB(pid)
		if err != nil {
			return err
		}
		fmt.Printf("gzip bomb, %d bytes (%d MiB decoded), POST %s: %d in %s; peak RSS %d MiB\n",
			len(single), bombSingleDecoded>>20, r.path, status, took.Round(time.Millisecond), after)
	}
	return nil
}

// zeroGzip is size zero bytes gzipped layers times, compressed as a stream:
// the decoded bytes never exist in this process.
func zeroGzip(size int64, layers int) ([]byte, error) {
	var out bytes.Buffer
	writers := make([]*gzip.Writer, layers)
	var w io.Writer = &out
	for i := range writers {
		zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		writers[i], w = zw, zw
	}
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := w.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			return nil, err
		}
	}
	for i := len(writers) - 1; i >= 0; i-- {
		if err := writers[i].Close(); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}
