// Package smtptest is a real SMTP server on loopback (emersion/go-smtp)
// that keeps every message it accepts, for tests of outgoing mail.
package smtptest

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one accepted message.
type Message struct {
	From string
	To   []string
	Data []byte
	// User is the SASL PLAIN user the client authenticated as ("" when none).
	User string
	TLS  bool
}

// Server is a running SMTP server.
type Server struct {
	srv      *smtp.Server
	ln       net.Listener
	mu       sync.Mutex
	msgs     []Message
	arrived  chan struct{}
	user     string
	password string
}

// Options configure a server.
type Options struct {
	// Addr to listen on; empty means 127.0.0.1:0.
	Addr string
	// User and Password, when set, are required (SASL PLAIN).
	User, Password string
	// TLSConfig enables STARTTLS (or implicit TLS with ImplicitTLS).
	TLSConfig   *tls.Config
	ImplicitTLS bool
}

// Start starts a server; it is closed at the end of the test.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{arrived: make(chan struct{}, 1000), user: opts.User, password: opts.Password}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for range 50 { // a port just released may linger briefly
		ln, err = net.Listen("tcp", addr)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("smtptest: %v", err)
	}
	if opts.ImplicitTLS {
		ln = tls.NewListener(ln, opts.TLSConfig)
	}
	s.ln = ln
	s.srv = smtp.NewServer(s)
	s.srv.Domain = "smtptest.localhost"
	s.srv.AllowInsecureAuth = true
	if !opts.ImplicitTLS {
		s.srv.TLSConfig = opts.TLSConfig
	}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Messages returns what was accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait blocks until n messages have arrived or the test's patience ends
// (a minute), and returns them.
func (s *Server) Wait(t testing.TB, n int) []Message {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("smtptest: %d of %d messages arrived", len(s.Messages()), n)
		}
	}
}

// NewSession implements smtp.Backend.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &session{s: s, tls: isTLS, conn: c}, nil
}

type session struct {
	s    *Server
	conn *smtp.Conn
	tls  bool
	user string
	from string
	to   []string
}

func (ss *session) AuthMechanisms() []string {
	if ss.s.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		if user != ss.s.user || pass != ss.s.password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "invalid credentials"}
		}
		ss.user = user
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.user != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := ss.conn.TLSConnectionState()
	ss.s.mu.Lock()
	ss.s.msgs = append(ss.s.msgs, Message{From: ss.from, To: ss.to, Data: b, User: ss.user, TLS: isTLS || ss.tls})
	ss.s.mu.Unlock()
	select {
	case ss.s.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }
