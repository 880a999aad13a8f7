package spamcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Spamd is a client of SpamAssassin's spamd. It sends the REPORT command
// of the SPAMC protocol (version 1.5), which answers the verdict in a
// header and the rules that fired, with their points, in the report's
// table. No library for the protocol is maintained, and the part used is a
// request line, one header and a table.
type Spamd struct {
	// Addr is spamd's host:port, or its Unix socket as a path or
	// unix:path (SPAMD_ADDR).
	Addr string
	// Timeout bounds one check; DefaultTimeout when zero.
	Timeout time.Duration
	// Dial connects; a net.Dialer's DialContext when nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Check implements Checker. The session is passed to SpamAssassin the way
// an MTA does, as the trace header the receiving server adds (Received:
// from HELO ([IP])), so that its relay rules see the real client.
func (s *Spamd) Check(ctx context.Context, msg []byte, env Envelope) (Result, error) {
	if len(msg) > MaxMessage {
		return Result{}, ErrTooLarge
	}
	msg = withReceived(msg, env)
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := s.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	network, addr := "tcp", s.Addr
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
	} else if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	conn, err := dial(ctx, network, addr)
	if err != nil {
		return Result{}, fmt.Errorf("spamd: %w", err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return Result{}, fmt.Errorf("spamd: %w", err)
	}
	// The connection is closed when ctx ends before the deadline.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := fmt.Sprintf("REPORT SPAMC/1.5\r\nContent-length: %d\r\n\r\n", len(msg))
	if _, err := io.WriteString(conn, req); err != nil {
		return Result{}, fmt.Errorf("spamd: sending: %w", err)
	}
	if _, err := conn.Write(msg); err != nil {
		return Result{}, fmt.Errorf("spamd: sending: %w", err)
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	answer, err := io.ReadAll(io.LimitReader(conn, MaxResponse+1))
	if err != nil {
		return Result{}, fmt.Errorf("spamd: reading: %w", err)
	}
	if len(answer) > MaxResponse {
		return Result{}, fmt.Errorf("spamd: the answer is over %d bytes", MaxResponse)
	}
	return ParseSpamdReport(answer)
}

// withReceived prepends a Received header naming the client, when known.
func withReceived(msg []byte, env Envelope) []byte {
	if !env.ClientIP.IsValid() {
		return msg
	}
	helo := env.Helo
	if helo == "" || !heloSafe(helo) {
		helo = "unknown"
	}
	h := fmt.Sprintf("Received: from %s ([%s])\r\n\tby mailwatch; %s\r\n", helo, env.ClientIP.Unmap(),
		time.Now().UTC().Format(time.RFC1123Z))
	return append([]byte(h), msg...)
}

// heloSafe accepts a HELO name that cannot break the header: printable
// ASCII without spaces, at most 255 bytes.
func heloSafe(s string) bool {
	if len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// ParseSpamdReport reads spamd's answer to REPORT: the status line, the
// Spam header (verdict, score and threshold) and, in the report body, the
// table of rules that fired. A report whose template has no such table
// (a site's own report template) yields the verdict without rules.
func ParseSpamdReport(answer []byte) (Result, error) {
	res := Result{Engine: "spamassassin"}
	head, body, _ := bytes.Cut(answer, []byte("\r\n\r\n"))
	lines := strings.Split(string(head), "\r\n")
	if err := spamdStatus(lines[0]); err != nil {
		return res, err
	}
	found := false
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "Spam") {
			continue
		}
		if err := spamdVerdict(value, &res); err != nil {
			return res, err
		}
		found = true
	}
	if !found {
		return res, errors.New("spamd: the answer has no Spam header")
	}
	res.Rules = sortRules(spamdRules(body))
	return res, nil
}

// spamdStatus checks "SPAMD/1.1 0 EX_OK"; another code is spamd's error.
func spamdStatus(line string) error {
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "SPAMD/") {
		return fmt.Errorf("spamd: unexpected answer %q", clip(line, 80))
	}
	if f[1] != "0" {
		return fmt.Errorf("spamd: error %s: %s", clip(f[1], 8), clip(strings.Join(f[2:], " "), 120))
	}
	return nil
}

// spamdVerdict reads " True ; 1000.0 / 5.0".
func spamdVerdict(v string, res *Result) error {
	verdict, scores, ok := strings.Cut(v, ";")
	score, threshold, ok2 := strings.Cut(scores, "/")
	if !ok || !ok2 {
		return fmt.Errorf("spamd: unreadable Spam header %q", clip(v, 80))
	}
	var err1, err2 error
	res.Score, err1 = strconv.ParseFloat(strings.TrimSpace(score), 64)
	res.Threshold, err2 = strconv.ParseFloat(strings.TrimSpace(threshold), 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("spamd: unreadable Spam header %q", clip(v, 80))
	}
	switch strings.ToLower(strings.TrimSpace(verdict)) {
	case "true", "yes":
		res.Spam = true
	}
	return nil
}

// spamdRules reads the report's table: after the dashed line under
// "pts rule name description", one rule a line ("1000 GTUBE  BODY: ..."),
// a description wrapped onto indented lines, until a blank line.
func spamdRules(body []byte) []Rule {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var rules []Rule
	inTable := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if !inTable {
			inTable = strings.HasPrefix(strings.TrimSpace(line), "----")
			continue
		}
		if strings.TrimSpace(line) == "" {
			break
		}
		if r, ok := spamdRule(line); ok {
			if len(rules) == MaxRules*2 {
				break // sortRules keeps MaxRules of the heaviest
			}
			rules = append(rules, r)
			continue
		}
		if n := len(rules); n > 0 && strings.HasPrefix(line, "  ") {
			d := rules[n-1].Description + " " + strings.TrimSpace(line)
			rules[n-1].Description = clip(d, maxDescription)
		}
	}
	return rules
}

// spamdRule reads one table line: points, rule name, description.
func spamdRule(line string) (Rule, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || (len(line)-len(strings.TrimLeft(line, " "))) > 4 {
		return Rule{}, false
	}
	pts, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !ruleName(f[1]) {
		return Rule{}, false
	}
	desc := strings.TrimSpace(strings.TrimPrefix(strings.TrimLeft(line, " "), f[0]))
	desc = strings.TrimSpace(strings.TrimPrefix(desc, f[1]))
	return Rule{Name: clip(f[1], 100), Points: pts, Description: clip(desc, maxDescription)}, true
}

// ruleName accepts SpamAssassin's rule names: letters, digits, _ and the
// occasional dot or dash of plugin rules.
func ruleName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}
