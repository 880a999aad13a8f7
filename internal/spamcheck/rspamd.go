package spamcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Rspamd is a client of rspamd's normal worker: POST /checkv2 with the
// message, the session in rspamd's request headers (Ip, Helo, From), and
// a JSON answer.
type Rspamd struct {
	// URL is the worker's base URL (RSPAMD_URL), e.g. http://127.0.0.1:11333.
	URL string
	// Password, when set, is sent in the Password header.
	Password string
	// Client sends the request; a client with Timeout when nil.
	Client *http.Client
	// Timeout bounds one check; DefaultTimeout when zero.
	Timeout time.Duration
}

// rspamdReply is the part of rspamd's answer used.
type rspamdReply struct {
	IsSkipped     bool    `json:"is_skipped"`
	Score         float64 `json:"score"`
	RequiredScore float64 `json:"required_score"`
	Action        string  `json:"action"`
	Symbols       map[string]struct {
		Name        string  `json:"name"`
		Score       float64 `json:"score"`
		Description string  `json:"description"`
	} `json:"symbols"`
}

// spamActions are rspamd's actions that treat the message as spam; "no
// action", "greylist" and "soft reject" (a delay) do not.
var spamActions = map[string]bool{
	"reject": true, "rewrite subject": true, "add header": true, "quarantine": true, "discard": true,
}

// Check implements Checker.
func (r *Rspamd) Check(ctx context.Context, msg []byte, env Envelope) (Result, error) {
	if len(msg) > MaxMessage {
		return Result{}, ErrTooLarge
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.URL, "/")+"/checkv2", bytes.NewReader(msg))
	if err != nil {
		return Result{}, fmt.Errorf("rspamd: %w", err)
	}
	if env.ClientIP.IsValid() {
		req.Header.Set("Ip", env.ClientIP.Unmap().String())
	}
	if env.Helo != "" && heloSafe(env.Helo) {
		req.Header.Set("Helo", env.Helo)
	}
	if env.MailFrom != "" && heloSafe(env.MailFrom) {
		req.Header.Set("From", env.MailFrom)
	}
	if r.Password != "" {
		req.Header.Set("Password", r.Password)
	}
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("rspamd: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return Result{}, fmt.Errorf("rspamd: reading: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("rspamd: HTTP %d: %s", resp.StatusCode, clip(strings.TrimSpace(string(body)), 120))
	}
	if len(body) > MaxResponse {
		return Result{}, fmt.Errorf("rspamd: the answer is over %d bytes", MaxResponse)
	}
	return ParseRspamdReply(body)
}

// ParseRspamdReply reads rspamd's checkv2 answer.
func ParseRspamdReply(body []byte) (Result, error) {
	var rep rspamdReply
	if err := json.Unmarshal(body, &rep); err != nil {
		return Result{}, fmt.Errorf("rspamd: unreadable answer: %w", err)
	}
	if rep.IsSkipped {
		return Result{}, fmt.Errorf("rspamd: the message was skipped (action %q)", clip(rep.Action, 40))
	}
	res := Result{Engine: "rspamd", Score: rep.Score, Threshold: rep.RequiredScore, Spam: spamActions[rep.Action]}
	for key, s := range rep.Symbols {
		name := s.Name
		if name == "" {
			name = key
		}
		if !ruleName(name) {
			continue
		}
		res.Rules = append(res.Rules, Rule{Name: name, Points: s.Score, Description: clip(s.Description, maxDescription)})
	}
	res.Rules = sortRules(res.Rules)
	return res, nil
}
