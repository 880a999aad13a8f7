// Package smtpd is mailwatch's inbound SMTP listener (RFC 5321), built on
// emersion/go-smtp. It accepts mail only for <local>@<INBOUND_DOMAIN>, asks a
// Store whether each recipient is a live receiver (refusing the others with
// 550 at RCPT, so senders learn at once), enforces a message size cap
// (RFC 1870, 552) and offers STARTTLS (RFC 3207) when given a certificate.
//
// Accepted messages are handed to the Store with their envelope, raw bytes
// prefixed by the Return-Path and Received trace fields that RFC 5321
// section 4.4 asks of a final delivery server, and the time DATA ended.
// Parsing and storage are the Store's business.
package smtpd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Defaults for the zero values of Config.
const (
	DefaultAddr            = ":2525"
	DefaultMaxMessageBytes = 10 << 20
	DefaultMaxRecipients   = 50
	// DefaultReadTimeout is how long the server waits for a command or for
	// more DATA. RFC 5321 section 4.5.3.2.7 suggests 5 minutes; receivers are
	// short-lived, so a stuck client is cut off sooner.
	DefaultReadTimeout  = 2 * time.Minute
	DefaultWriteTimeout = time.Minute

	// maxLineLength is the longest line accepted, in commands and DATA.
	// RFC 5321 section 4.5.3.1.6 sets 1000 octets, but generated HTML mail
	// routinely breaks it and a test inbox must show what was sent.
	maxLineLength = 64 << 10

	// Deadlines of the Store calls; the client is waiting on each.
	acceptTimeout  = 10 * time.Second
	deliverTimeout = 30 * time.Second
)

var (
	// ErrUnknownRecipient is returned by Store.AcceptRecipient for an
	// address that is no receiver. The client gets 550 5.1.1.
	ErrUnknownRecipient = errors.New("unknown recipient")

	// ErrExpired is returned by Store.AcceptRecipient for a receiver past
	// its expiry. The client gets 550 5.1.1.
	ErrExpired = errors.New("recipient expired")
)

// RefusedError is returned, possibly wrapped, by Store.Deliver for a message
// refused for its content (unreadable, or a MIME structure over a limit).
// The client gets a permanent 554 5.6.0 with Reason, so it does not retry.
// Reason is shown to the sender: one line, nothing internal.
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Store is what the listener needs from storage; the integrator implements it
// over Postgres. Both methods are called concurrently from many sessions and
// must respect ctx.
type Store interface {
	// AcceptRecipient is called at RCPT TO for an address of the inbound
	// domain, given as "<local>@<domain>": the local part exactly as sent,
	// the domain in lower case. It returns nil to accept, ErrUnknownRecipient
	// or ErrExpired (possibly wrapped) to refuse with 550, and any other
	// error to answer 451 so the sender retries later.
	AcceptRecipient(ctx context.Context, address string) error

	// Deliver stores one message for all its accepted recipients. A
	// *RefusedError answers 554 5.6.0 to DATA; any other error answers 451,
	// so the sender retries: Deliver should be all-or-nothing.
	Deliver(ctx context.Context, env Envelope) error
}

// Envelope is one accepted message.
type Envelope struct {
	// From is the reverse path of MAIL FROM; empty for a bounce ("<>").
	From string
	// To lists the accepted recipients, in RCPT order, without duplicates,
	// in the form given to AcceptRecipient.
	To []string
	// Raw is the message as received, preceded by the Return-Path and
	// Received fields added here.
	Raw []byte
	// ReceivedAt is when the end of DATA was read, before Deliver is
	// called: the start of the end-to-end latency a waiter sees.
	ReceivedAt time.Time
	// RemoteAddr is the client's address, "ip:port".
	RemoteAddr string
	// Helo is the name the client gave in EHLO/HELO.
	Helo string
	// TLS reports whether the message came over STARTTLS.
	TLS bool
	// TLSVersion and TLSCipher name the negotiated protocol version (e.g.
	// "TLS 1.3") and cipher suite; empty without TLS.
	TLSVersion string
	TLSCipher  string
}

// Config configures the listener. Domain is required; zero values of the
// others take the Default constants.
type Config struct {
	// Addr is the TCP address ListenAndServe listens on (SMTP_ADDR).
	Addr string
	// Domain is the inbound domain (INBOUND_DOMAIN): recipients
	// <local>@<Domain>, compared case-insensitively, are accepted.
	Domain string
	// AcceptDomain, when set, is asked about a recipient domain other than
	// Domain (lower case, without a trailing dot): true accepts its
	// recipients too (a customer's verified inbound subdomain), an error
	// answers 451. Its answers are cached for 30 seconds (at most 4,096
	// names).
	AcceptDomain func(ctx context.Context, domain string) (bool, error)
	// Hostname is the name in the greeting and in Received fields;
	// defaults to Domain.
	Hostname string
	// MaxMessageBytes caps a message; larger ones get 552 5.3.4, at MAIL
	// for a declared SIZE (RFC 1870), else once the cap is passed in DATA
	// or in a BDAT chunk (RFC 3030).
	MaxMessageBytes int64
	// MaxRecipients caps RCPT TO commands per message; more get 452.
	MaxRecipients int
	// ReadTimeout bounds each wait on the client, counted from the
	// session's last progress (an accepted MAIL or RCPT, message data):
	// commands that move nothing forward (NOOP, RSET, HELO, refused ones)
	// do not restart it. WriteTimeout bounds each reply.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// TLSConfig, when set, enables STARTTLS (RFC 3207).
	TLSConfig *tls.Config
	// MaxConnections caps open sessions, and MaxConnectionsPerIP those of
	// one client address (an IPv6 /64); a connection over either cap is
	// answered 421 4.7.0 and closed.
	MaxConnections      int
	MaxConnectionsPerIP int
	// SessionTimeout bounds a whole session: reads and writes past it fail
	// whatever the client sends, and the session ends.
	SessionTimeout time.Duration
}

// Server is the inbound SMTP listener.
type Server struct {
	cfg    Config
	store  Store
	logger *slog.Logger
	smtp   *smtp.Server
	// domains caches Config.AcceptDomain.
	domains *domainCache
	// limits counts open sessions against the connection caps.
	limits *connLimits

	// ctx bounds the Store calls of every session; it is cancelled when
	// Close or an expired Shutdown gives up on sessions.
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	conns map[*smtp.Conn]struct{}
	// stopped and listeners close the window in which go-smtp would miss a
	// listener: its Close only closes listeners Serve has already
	// registered, so a Serve that starts after Close would accept forever.
	stopped   bool
	listeners []net.Listener
}

// NewServer validates cfg and builds a server that accepts mail for
// cfg.Domain on behalf of store.
func NewServer(cfg Config, store Store, logger *slog.Logger) (*Server, error) {
	cfg.Domain = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(cfg.Domain), "."))
	if cfg.Domain == "" {
		return nil, errors.New("smtpd: Domain (INBOUND_DOMAIN) is required")
	}
	if store == nil {
		return nil, errors.New("smtpd: a Store is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.Domain
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxConnectionsPerIP <= 0 {
		cfg.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}

	s := &Server{
		cfg:    cfg,
		store:  store,
		logger: logger.With("component", "smtpd"),
		conns:  make(map[*smtp.Conn]struct{}),
		limits: newConnLimits(cfg.MaxConnections, cfg.MaxConnectionsPerIP),
	}
	if cfg.AcceptDomain != nil {
		s.domains = newDomainCache(cfg.AcceptDomain)
	}
	// The root of the sessions' contexts: a listener has no request context
	// to inherit from, and its lifetime is the server's.
	s.ctx, s.cancel = context.WithCancel(context.Background())

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Hostname
	// The size cap is enforced by the session (MAIL SIZE= and the message
	// reader), not by go-smtp: go-smtp refuses an oversize BDAT chunk and
	// then discards it through its command line-length limit, so a chunk
	// with a long line desynchronises the session and the connection is
	// reset. EHLO therefore advertises SIZE without a figure (RFC 1870
	// section 4 allows it).
	srv.MaxMessageBytes = 0
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = maxLineLength
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.TLSConfig = cfg.TLSConfig
	srv.EnableSMTPUTF8 = true // RFC 6531: addresses and headers may be UTF-8.
	srv.ErrorLog = errorLog{s.logger}
	s.smtp = srv
	return s, nil
}

// ListenAndServe listens on Config.Addr and serves until Shutdown or Close,
// after which it returns nil.
func (s *Server) ListenAndServe() error {
	l, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("error listening for SMTP on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(l)
}

// Serve accepts SMTP sessions on l until Shutdown or Close, after which it
// returns nil. It closes l.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = l.Close()
		return nil
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	s.logger.Info("SMTP listener started", "addr", l.Addr().String(), "domain", s.cfg.Domain,
		"starttls", s.cfg.TLSConfig != nil, "max_message_bytes", s.cfg.MaxMessageBytes,
		"max_connections", s.cfg.MaxConnections, "max_connections_per_ip", s.cfg.MaxConnectionsPerIP,
		"session_timeout", s.cfg.SessionTimeout.String())
	if err := s.smtp.Serve(&limitListener{Listener: l, srv: s}); err != nil {
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if stopped && errors.Is(err, net.ErrClosed) {
			return nil // stop closed l before go-smtp marked itself done
		}
		return fmt.Errorf("error serving SMTP: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections and waits for open sessions to end
// (clients QUIT or time out). If ctx ends first, it cancels the sessions'
// Store calls, closes their connections and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	err := s.smtp.Shutdown(ctx)
	if ctx.Err() == nil {
		s.cancel()
		return stopError(err)
	}
	s.closeSessions()
	return ctx.Err()
}

// Close stops the server at once, dropping open sessions.
func (s *Server) Close() error {
	s.stop()
	err := s.smtp.Close()
	s.closeSessions()
	return stopError(err)
}

// stopError drops what go-smtp reports of a server already stopped or a
// listener stop has already closed.
func stopError(err error) error {
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// stop refuses later Serve calls and closes the listeners of earlier ones,
// so that each of them returns whether or not go-smtp has seen it yet.
func (s *Server) stop() {
	s.mu.Lock()
	s.stopped = true
	listeners := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	for _, l := range listeners {
		_ = l.Close()
	}
}

// closeSessions cancels every Store call and closes every connection. go-smtp
// drops its own list of connections once Shutdown has begun, so the server
// keeps one.
func (s *Server) closeSessions() {
	s.cancel()
	// Closing a connection ends its session, which takes s.mu: collect first.
	s.mu.Lock()
	conns := make([]*smtp.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return &session{srv: s, conn: c, logger: s.logger.With("remote_addr", c.Conn().RemoteAddr().String())}, nil
}

func (s *Server) endSession(c *smtp.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// errorLog routes go-smtp's internal error reports to slog.
type errorLog struct{ logger *slog.Logger }

func (l errorLog) Printf(format string, v ...any) { l.logger.Warn(fmt.Sprintf(format, v...)) }
func (l errorLog) Println(v ...any)               { l.logger.Warn(strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }
