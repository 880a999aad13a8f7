package mxprobe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Bounds on what a server may send. A hostile or broken server can make the
// probe neither read forever nor allocate much: every read has a deadline,
// the conversation has a deadline, and the bytes, lines and line lengths
// read are capped.
const (
	// maxLineLength caps one reply line, CRLF included. RFC 5321 section
	// 4.5.3.1.5 allows 512 octets; real servers send a little more.
	maxLineLength = 2048
	// maxReplyLines caps the lines of one multi-line reply; an EHLO reply
	// lists about a dozen extensions.
	maxReplyLines = 100
	// maxReadBytes caps the bytes read as SMTP replies in each phase
	// (before and after TLS). The TLS handshake is bounded by crypto/tls.
	maxReadBytes = 64 << 10
	// maxTextLength caps reply text kept in results (banner, details).
	maxTextLength = 512
)

// errReadBudget is returned once a phase has read maxReadBytes.
var errReadBudget = errors.New("the server sent more than the probe reads")

// errProtocol marks replies that are not SMTP.
var errProtocol = errors.New("malformed SMTP reply")

// reply is one SMTP reply (RFC 5321 section 4.2): a three-digit code and
// the text of each line, without the code and separator.
type reply struct {
	Code  int
	Lines []string
}

// text is the reply's lines joined, bounded and made printable, for
// results.
func (r reply) text() string {
	return cleanText(strconv.Itoa(r.Code) + " " + strings.Join(r.Lines, " / "))
}

// budgetReader fails with errReadBudget once n bytes have been read.
type budgetReader struct {
	r io.Reader
	n int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errReadBudget
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}

// newReplyReader returns a reader of replies from r, read through a budget.
// The buffer size is the line length cap: bufio.ReadSlice fails with
// ErrBufferFull on a longer line instead of growing.
func newReplyReader(r io.Reader) *bufio.Reader {
	return bufio.NewReaderSize(&budgetReader{r: r, n: maxReadBytes}, maxLineLength)
}

// readReply reads one possibly multi-line reply. Every line must carry the
// same code; a line "ddd-text" continues the reply and "ddd text" or "ddd"
// ends it.
func readReply(r *bufio.Reader) (reply, error) {
	var rep reply
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return rep, fmt.Errorf("%w: a reply line is longer than %d bytes", errProtocol, maxLineLength)
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return rep, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		code, last, text, ok := parseReplyLine(line)
		if !ok {
			return rep, fmt.Errorf("%w: %q", errProtocol, cleanText(string(line)))
		}
		if rep.Code != 0 && code != rep.Code {
			return rep, fmt.Errorf("%w: a multi-line reply changes code from %d to %d", errProtocol, rep.Code, code)
		}
		rep.Code = code
		if len(rep.Lines) == maxReplyLines {
			return rep, fmt.Errorf("%w: a reply has more than %d lines", errProtocol, maxReplyLines)
		}
		rep.Lines = append(rep.Lines, string(text))
		if last {
			return rep, nil
		}
	}
}

// parseReplyLine splits "250-text", "250 text" or "250". The code's first
// digit is 2 to 5 (RFC 5321 section 4.2.1; 1yz is unused in SMTP).
func parseReplyLine(line []byte) (code int, last bool, text []byte, ok bool) {
	if len(line) < 3 {
		return 0, false, nil, false
	}
	for i, c := range line[:3] {
		if c < '0' || c > '9' || (i == 0 && (c < '2' || c > '5')) {
			return 0, false, nil, false
		}
		code = code*10 + int(c-'0')
	}
	switch {
	case len(line) == 3:
		return code, true, nil, true
	case line[3] == ' ':
		return code, true, line[4:], true
	case line[3] == '-':
		return code, false, line[4:], true
	}
	return 0, false, nil, false
}

// cleanText bounds s and replaces bytes that are not printable ASCII, so
// server text is safe to store, log and show.
func cleanText(s string) string {
	if len(s) > maxTextLength {
		s = s[:maxTextLength]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// session is one SMTP conversation. Each step sets a deadline of the step
// timeout, capped by the conversation's deadline; a cancelled context
// expires the connection's deadline at once.
type session struct {
	conn     net.Conn // raw TCP, then the tls.Conn
	r        *bufio.Reader
	step     time.Duration
	deadline time.Time
	// synced is false after an I/O or protocol error, when sending QUIT
	// makes no sense.
	synced bool
	// startTLSOffered is set by the last EHLO reply.
	startTLSOffered bool
}

func newSession(conn net.Conn, step time.Duration, deadline time.Time) *session {
	return &session{conn: conn, r: newReplyReader(conn), step: step, deadline: deadline, synced: true}
}

func (s *session) stepDeadline() time.Time {
	d := time.Now().Add(s.step)
	if d.After(s.deadline) {
		d = s.deadline
	}
	return d
}

// read reads a reply within one step.
func (s *session) read() (reply, error) {
	_ = s.conn.SetDeadline(s.stepDeadline())
	rep, err := readReply(s.r)
	if err != nil {
		s.synced = false
	}
	return rep, err
}

// cmd sends one command line and reads its reply within one step.
func (s *session) cmd(line string) (reply, error) {
	_ = s.conn.SetDeadline(s.stepDeadline())
	if _, err := io.WriteString(s.conn, line+"\r\n"); err != nil {
		s.synced = false
		return reply{}, err
	}
	return s.read()
}

// startTLS upgrades the connection after a 220 reply to STARTTLS. Bytes the
// server sent after that reply and before the handshake are a protocol
// violation (and the shape of the STARTTLS injection attacks), so they fail
// the probe rather than being fed to TLS.
func (s *session) startTLS(ctx context.Context, cfg *tls.Config) (*tls.Conn, error) {
	if s.r.Buffered() > 0 {
		s.synced = false
		return nil, fmt.Errorf("%w: data after the STARTTLS reply, before the handshake", errProtocol)
	}
	tc := tls.Client(s.conn, cfg)
	_ = s.conn.SetDeadline(s.stepDeadline())
	if err := tc.HandshakeContext(ctx); err != nil {
		s.synced = false
		return nil, err
	}
	s.conn = tc
	s.r = newReplyReader(tc)
	return tc, nil
}

// quit sends QUIT and reads the reply, ignoring failures: the probe is
// done either way.
func (s *session) quit() {
	if s.synced {
		_, _ = s.cmd("QUIT")
	}
}

// ehloExtensions returns the extension keywords of an EHLO reply in upper
// case: the first line is the server's greeting, each other line starts
// with a keyword (RFC 5321 section 4.1.1.1).
func ehloExtensions(rep reply) []string {
	var exts []string
	for i, line := range rep.Lines {
		if i == 0 {
			continue
		}
		kw, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if kw != "" {
			exts = append(exts, strings.ToUpper(kw))
		}
	}
	return exts
}
