package smtpd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// session is one SMTP transaction state (RFC 5321 section 3.3): reset by
// RSET, by a new MAIL and after DATA.
type session struct {
	srv    *Server
	conn   *smtp.Conn
	logger *slog.Logger

	from string
	to   []string
}

// Replies, with enhanced status codes from RFC 3463. go-smtp recognises an
// *smtp.SMTPError only unwrapped, so these are returned as they are.
func replyNoSuchUser() error {
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such recipient here"}
}

func replyExpired() error {
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "Recipient has expired"}
}

func replyWrongDomain() error {
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 2}, Message: "Not accepting mail for this domain"}
}

func replyBadAddress() error {
	return &smtp.SMTPError{Code: 501, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: "Bad recipient address syntax"}
}

// replyRefused is the permanent refusal of a message for its content (RFC
// 3463: 5.6.0, other or undefined media error).
func replyRefused(reason string) error {
	reason = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message refused: " + reason}
}

func replyTempFailure() error {
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure, try again later"}
}

func replyTooLarge() error {
	return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Maximum message size exceeded"}
}

// Mail starts a transaction, refusing a declared SIZE over the cap with 552
// (RFC 1870 section 6.2).
func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if opts != nil && opts.Size > s.srv.cfg.MaxMessageBytes {
		return replyTooLarge()
	}
	s.from = from
	s.to = nil
	madeProgress(s.conn.Conn())
	return nil
}

// Rcpt accepts a recipient of the inbound domain (or of a domain
// Config.AcceptDomain accepts) that the Store knows.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ctx, cancel := context.WithTimeout(s.srv.ctx, acceptTimeout)
	defer cancel()
	address, err := s.srv.recipientAddress(ctx, to)
	if err != nil {
		s.logger.Debug("recipient refused", "rcpt", to, "reason", err.Error())
		return err
	}
	for _, existing := range s.to {
		if existing == address {
			return nil
		}
	}

	switch err := s.srv.store.AcceptRecipient(ctx, address); {
	case err == nil:
	case errors.Is(err, ErrUnknownRecipient):
		s.logger.Debug("recipient refused", "rcpt", address, "reason", "unknown")
		return replyNoSuchUser()
	case errors.Is(err, ErrExpired):
		s.logger.Debug("recipient refused", "rcpt", address, "reason", "expired")
		return replyExpired()
	default:
		s.logger.Error("error checking recipient", "rcpt", address, "error", err)
		return replyTempFailure()
	}

	s.to = append(s.to, address)
	madeProgress(s.conn.Conn())
	return nil
}

// recipientAddress checks that to is <local>@<inbound domain> (or a domain
// Config.AcceptDomain accepts) and returns it with the domain in lower
// case, or the reply refusing it.
func (s *Server) recipientAddress(ctx context.Context, to string) (string, error) {
	at := strings.LastIndexByte(to, '@')
	if at <= 0 || at == len(to)-1 {
		return "", replyBadAddress()
	}
	local, domain := to[:at], to[at+1:]
	// RFC 5321 section 4.5.3.1.1: a local part is at most 64 octets.
	if len(local) > 64 {
		return "", replyBadAddress()
	}
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if domain == s.cfg.Domain {
		return local + "@" + s.cfg.Domain, nil
	}
	ok, err := s.domains.accepts(ctx, domain)
	if err != nil {
		s.logger.Error("error checking recipient domain", "domain", domain, "error", err)
		return "", replyTempFailure()
	}
	if !ok {
		return "", replyWrongDomain()
	}
	return local + "@" + domain, nil
}

// Data reads the message (DATA, or the BDAT chunks of one message) and hands
// it to the Store. Past Config.MaxMessageBytes it stops reading and answers
// 552 5.3.4; go-smtp then discards the rest of the data or chunk, and the
// session goes on. go-smtp only calls Data once a recipient was accepted.
func (s *session) Data(r io.Reader) error {
	// The client waits on the answer (the Store's work included): its idle
	// bound starts again from it.
	defer madeProgress(s.conn.Conn())
	var buf bytes.Buffer
	limited := &io.LimitedReader{R: &deadlineReader{r: r, conn: s.conn.Conn(), timeout: s.srv.cfg.ReadTimeout}, N: s.srv.cfg.MaxMessageBytes + 1}
	_, err := buf.ReadFrom(limited)
	if err == nil && int64(buf.Len()) > s.srv.cfg.MaxMessageBytes {
		s.logger.Info("message refused", "reason", "over the size cap", "rcpt_count", len(s.to))
		return replyTooLarge()
	}
	if errors.Is(err, smtp.ErrTooLongLine) {
		// go-smtp reads DATA ahead through its line-length limit. A line
		// that long in a message that cannot fit under the cap anyway is
		// an oversize message; otherwise it is refused for the line.
		if int64(buf.Len())+maxLineLength >= s.srv.cfg.MaxMessageBytes {
			s.logger.Info("message refused", "reason", "over the size cap", "rcpt_count", len(s.to))
			return replyTooLarge()
		}
		s.logger.Info("message refused", "reason", "line too long", "rcpt_count", len(s.to))
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
			Message: fmt.Sprintf("Message refused: a line is longer than %d bytes", maxLineLength)}
	}
	if err != nil {
		var smtpErr *smtp.SMTPError
		if errors.As(err, &smtpErr) {
			s.logger.Info("message refused", "reason", smtpErr.Message, "rcpt_count", len(s.to))
			return smtpErr
		}
		return fmt.Errorf("error reading message data: %w", err)
	}
	receivedAt := time.Now()

	tlsState, isTLS := s.conn.TLSConnectionState()
	env := Envelope{
		From:       s.from,
		To:         append([]string(nil), s.to...),
		ReceivedAt: receivedAt,
		RemoteAddr: s.conn.Conn().RemoteAddr().String(),
		Helo:       s.conn.Hostname(),
		TLS:        isTLS && tlsState.HandshakeComplete,
	}
	if env.TLS {
		env.TLSVersion = tls.VersionName(tlsState.Version)
		env.TLSCipher = tls.CipherSuiteName(tlsState.CipherSuite)
	}
	env.Raw = append(s.srv.traceFields(env), buf.Bytes()...)

	ctx, cancel := context.WithTimeout(s.srv.ctx, deliverTimeout)
	defer cancel()
	if err := s.srv.store.Deliver(ctx, env); err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			s.logger.Info("message refused", "reason", refused.Reason, "rcpt_count", len(env.To), "size", len(env.Raw))
			return replyRefused(refused.Reason)
		}
		s.logger.Error("error delivering message", "rcpt_count", len(env.To), "size", len(env.Raw), "error", err)
		return replyTempFailure()
	}
	s.logger.Info("message accepted", "from", env.From, "rcpt_count", len(env.To), "size", len(env.Raw), "tls", env.TLS)
	return nil
}

// traceFields returns the Return-Path and Received fields a final delivery
// server prepends (RFC 5321 section 4.4; "with ESMTPS" per RFC 3848).
func (s *Server) traceFields(env Envelope) []byte {
	ip := env.RemoteAddr
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	protocol := "ESMTP"
	if env.TLS {
		protocol = "ESMTPS"
	}
	returnPath := "" // The null reverse path of a bounce stays "<>".
	if env.From != "" {
		returnPath = traceText(env.From)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Return-Path: <%s>\r\n", returnPath)
	fmt.Fprintf(&b, "Received: from %s ([%s])\r\n\tby %s with %s;\r\n\t%s\r\n",
		traceText(env.Helo), ip, s.cfg.Hostname, protocol, env.ReceivedAt.UTC().Format(time.RFC1123Z))
	return b.Bytes()
}

// traceText keeps client-supplied text from breaking a header field: no
// control characters, parentheses or angle brackets, at most 255 bytes.
func traceText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x21 || r == 0x7f || strings.ContainsRune("()<>", r) {
			return -1
		}
		return r
	}, s)
	if len(s) > 255 {
		s = s[:255]
	}
	if s == "" {
		return "unknown"
	}
	return s
}

// Reset aborts the transaction (RSET).
func (s *session) Reset() {
	s.from = ""
	s.to = nil
}

// Logout ends the session when the connection closes or after STARTTLS.
func (s *session) Logout() error {
	s.srv.endSession(s.conn)
	return nil
}

// deadlineReader pushes the read deadline forward before each read of DATA:
// go-smtp sets it once per command line, which would bound the whole upload
// of a large message by ReadTimeout. Message bytes are progress; the
// session deadline still bounds the whole upload.
type deadlineReader struct {
	r       io.Reader
	conn    net.Conn
	timeout time.Duration
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if err := d.conn.SetReadDeadline(time.Now().Add(d.timeout)); err != nil {
		return 0, fmt.Errorf("error setting read deadline: %w", err)
	}
	n, err := d.r.Read(p)
	if n > 0 {
		madeProgress(d.conn)
	}
	return n, err
}
