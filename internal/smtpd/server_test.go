package smtpd

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/inbound"
)

const testDomain = "inbound.mailwatch.test"

// memStore is an in-memory Store: receivers by address, with a state.
type memStore struct {
	mu         sync.Mutex
	receivers  map[string]error // nil: live; else the AcceptRecipient error
	delivered  []Envelope
	deliverErr error
	accepted   []string
}

func newMemStore() *memStore {
	return &memStore{receivers: map[string]error{
		"live@" + testDomain:    nil,
		"second@" + testDomain:  nil,
		"Mixed@" + testDomain:   nil,
		"expired@" + testDomain: fmt.Errorf("receiver 42: %w", ErrExpired),
		"broken@" + testDomain:  errors.New("connection refused"),
	}}
}

func (m *memStore) AcceptRecipient(_ context.Context, address string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accepted = append(m.accepted, address)
	err, ok := m.receivers[address]
	if !ok {
		return ErrUnknownRecipient
	}
	return err
}

func (m *memStore) Deliver(_ context.Context, env Envelope) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deliverErr != nil {
		return m.deliverErr
	}
	m.delivered = append(m.delivered, env)
	return nil
}

func (m *memStore) deliveries() []Envelope {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Envelope(nil), m.delivered...)
}

type testBundle struct {
	addr  string
	srv   *Server
	store *memStore
	// rootCAs trusts the server's certificate when STARTTLS is configured.
	rootCAs *x509.CertPool
}

type setupOpts struct {
	tls             bool
	maxMessageBytes int64
	acceptDomain    func(ctx context.Context, domain string) (bool, error)
	// Connection caps and deadlines (Config's defaults when zero).
	maxConnections      int
	maxConnectionsPerIP int
	readTimeout         time.Duration
	sessionTimeout      time.Duration
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()

	store := newMemStore()
	cfg := Config{
		Domain:          strings.ToUpper(testDomain) + ".", // normalised by NewServer
		Hostname:        "mx.mailwatch.test",
		MaxMessageBytes: opts.maxMessageBytes,
		MaxRecipients:   5,
		AcceptDomain:    opts.acceptDomain,

		MaxConnections:      opts.maxConnections,
		MaxConnectionsPerIP: opts.maxConnectionsPerIP,
		ReadTimeout:         opts.readTimeout,
		SessionTimeout:      opts.sessionTimeout,
	}
	var rootCAs *x509.CertPool
	if opts.tls {
		cert, pool := selfSignedCert(t)
		cfg.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		rootCAs = pool
	}

	logger := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := NewServer(cfg, store, logger)
	require.NoError(t, err)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-served)
	})

	return &testBundle{addr: l.Addr().String(), srv: srv, store: store, rootCAs: rootCAs}
}

// testWriter sends the server's log lines to the test log until the test
// ends: connection goroutines may still log after Close returns, and
// t.Log then panics.
type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newTestWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	// Registered before the server's cleanup, so it runs after it.
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// selfSignedCert makes a certificate for 127.0.0.1 and localhost and a pool
// that trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mx.mailwatch.test"},
		DNSNames:              []string{"localhost", "mx.mailwatch.test"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)

	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// dial opens a real SMTP session and says EHLO.
func dial(t *testing.T, addr string) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Hello("client.example.org"))
	return c
}

// requireCode checks that err is an SMTP reply with the given code.
func requireCode(t *testing.T, err error, code int) {
	t.Helper()
	var tpErr *textproto.Error
	require.ErrorAs(t, err, &tpErr)
	require.Equal(t, code, tpErr.Code, tpErr.Msg)
}

// send runs MAIL, RCPT for each recipient and DATA, and returns the RCPT
// errors and the DATA error.
func send(t *testing.T, c *smtp.Client, from string, to []string, msg []byte) ([]error, error) {
	t.Helper()
	require.NoError(t, c.Mail(from))
	rcptErrs := make([]error, len(to))
	for i, rcpt := range to {
		rcptErrs[i] = c.Rcpt(rcpt)
	}
	w, err := c.Data()
	if err != nil {
		return rcptErrs, err
	}
	_, err = w.Write(msg)
	require.NoError(t, err)
	return rcptErrs, w.Close()
}

// crlf turns a readable test message into SMTP's CRLF line endings.
func crlf(s string) []byte {
	return []byte(strings.ReplaceAll(strings.TrimPrefix(s, "\n"), "\n", "\r\n"))
}

func TestServer(t *testing.T) {
	t.Parallel()

	t.Run("MultipartWithAttachment", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		pdf := []byte("%PDF-1.4 fake report\x00\x01\x02")
		msg := crlf(fmt.Sprintf(`
From: Sender <sender@example.org>
To: live@inbound.mailwatch.test
Subject: Report attached
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8

Your verification code is 271828.
.A line starting with a dot survives dot-stuffing.
--b1
Content-Type: application/pdf
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

%s
--b1--
`, base64.StdEncoding.EncodeToString(pdf)))

		before := time.Now()
		c := dial(t, bundle.addr)
		rcptErrs, err := send(t, c, "bounce@example.org", []string{"live@" + testDomain}, msg)
		require.NoError(t, rcptErrs[0])
		require.NoError(t, err)
		require.NoError(t, c.Quit())
		after := time.Now()

		envs := bundle.store.deliveries()
		require.Len(t, envs, 1)
		env := envs[0]
		require.Equal(t, "bounce@example.org", env.From)
		require.Equal(t, []string{"live@" + testDomain}, env.To)
		require.Equal(t, "client.example.org", env.Helo)
		require.False(t, env.TLS)
		require.Empty(t, env.TLSVersion)
		require.Empty(t, env.TLSCipher)
		require.True(t, strings.HasPrefix(env.RemoteAddr, "127.0.0.1:"), env.RemoteAddr)
		require.False(t, env.ReceivedAt.Before(before))
		require.False(t, env.ReceivedAt.After(after))

		// The message arrives byte for byte, after the trace fields.
		require.True(t, bytes.HasSuffix(env.Raw, msg))
		trace := string(env.Raw[:len(env.Raw)-len(msg)])
		require.True(t, strings.HasPrefix(trace, "Return-Path: <bounce@example.org>\r\nReceived: from client.example.org ([127.0.0.1])\r\n\tby mx.mailwatch.test with ESMTP;\r\n\t"), trace)

		parsed, err := inbound.Parse(env.Raw)
		require.NoError(t, err)
		require.Equal(t, "Report attached", parsed.Subject)
		require.Contains(t, parsed.Text, "\n.A line starting with a dot")
		require.Equal(t, []inbound.Attachment{{
			Filename: "report.pdf", ContentType: "application/pdf", Size: len(pdf), Disposition: inbound.DispositionAttachment,
		}}, parsed.Attachments)
		require.Equal(t, []string{"271828"}, parsed.Codes)
	})

	t.Run("NonUTF8Charset", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		// 8-bit ISO-8859-1 body and subject, as old mailers send them.
		msg := append(crlf(`
From: shop@example.fr
To: live@inbound.mailwatch.test
Subject: =?ISO-8859-1?Q?Cr=E8me_br=FBl=E9e?=
MIME-Version: 1.0
Content-Type: text/plain; charset=ISO-8859-1
Content-Transfer-Encoding: 8bit

`), []byte("Caf\xe9 cr\xe8me, code 5150\r\n")...)

		c := dial(t, bundle.addr)
		_, err := send(t, c, "shop@example.fr", []string{"live@" + testDomain}, msg)
		require.NoError(t, err)
		require.NoError(t, c.Quit())

		envs := bundle.store.deliveries()
		require.Len(t, envs, 1)
		require.True(t, bytes.HasSuffix(envs[0].Raw, msg), "raw bytes are kept undecoded")

		parsed, err := inbound.Parse(envs[0].Raw)
		require.NoError(t, err)
		require.Equal(t, "Crème brûlée", parsed.Subject)
		require.Equal(t, "Café crème, code 5150\r\n", parsed.Text)
	})

	t.Run("OverSizeRejectedAtData", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{maxMessageBytes: 4096})

		msg := crlf("Subject: big\n\n" + strings.Repeat("0123456789abcdef\n", 1000))
		c := dial(t, bundle.addr)
		_, err := send(t, c, "a@example.org", []string{"live@" + testDomain}, msg)
		requireCode(t, err, 552)
		require.Empty(t, bundle.store.deliveries())

		// The session goes on: a small message afterwards is accepted.
		_, err = send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: small\n\nok\n"))
		require.NoError(t, err)
		require.NoError(t, c.Quit())
		require.Len(t, bundle.store.deliveries(), 1)
	})

	t.Run("OverSizeDeclaredAtMail", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{maxMessageBytes: 4096})

		// RFC 1870: a SIZE over the limit is refused before any data.
		conn := rawDial(t, bundle.addr)
		conn.cmd(t, 250, "EHLO client.example.org")
		conn.cmd(t, 552, "MAIL FROM:<a@example.org> SIZE=5000")
		conn.cmd(t, 250, "MAIL FROM:<a@example.org> SIZE=100")
		conn.cmd(t, 221, "QUIT")
	})

	t.Run("UnknownRecipient", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		require.NoError(t, c.Mail("a@example.org"))
		requireCode(t, c.Rcpt("nobody@"+testDomain), 550)
		_, err := c.Data()
		requireCode(t, err, 502) // no recipient was accepted
		require.NoError(t, c.Quit())
		require.Empty(t, bundle.store.deliveries())
	})

	t.Run("ExpiredRecipient", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		conn := rawDial(t, bundle.addr)
		conn.cmd(t, 250, "EHLO client.example.org")
		conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
		msg := conn.cmd(t, 550, "RCPT TO:<expired@inbound.mailwatch.test>")
		require.Contains(t, msg, "5.1.1")
		conn.cmd(t, 221, "QUIT")
	})

	t.Run("OtherDomains", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		conn := rawDial(t, bundle.addr)
		conn.cmd(t, 250, "EHLO client.example.org")
		conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
		for _, rcpt := range []string{
			"live@example.com",
			"live@sub." + testDomain,
			"live@" + testDomain + ".evil.example",
			"live@[127.0.0.1]",
		} {
			msg := conn.cmd(t, 550, "RCPT TO:<"+rcpt+">")
			require.Contains(t, msg, "5.1.2", rcpt)
		}
		conn.cmd(t, 501, "RCPT TO:<"+strings.Repeat("x", 65)+"@"+testDomain+">")
		conn.cmd(t, 221, "QUIT")

		bundle.store.mu.Lock()
		defer bundle.store.mu.Unlock()
		require.Empty(t, bundle.store.accepted, "the Store is not asked about other domains")
	})

	t.Run("DomainCaseInsensitive", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		// The domain is matched case-insensitively; the local part is passed
		// as sent.
		rcptErrs, err := send(t, c, "a@example.org", []string{"live@Inbound.MailWatch.Test", "Mixed@INBOUND.MAILWATCH.TEST."}, crlf("Subject: x\n\nx\n"))
		require.NoError(t, errors.Join(rcptErrs...))
		require.NoError(t, err)
		require.NoError(t, c.Quit())
		require.Equal(t, []string{"live@" + testDomain, "Mixed@" + testDomain}, bundle.store.deliveries()[0].To)
	})

	t.Run("SomeRecipientsUnknown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		rcptErrs, err := send(t, c, "a@example.org", []string{
			"live@" + testDomain,
			"nobody@" + testDomain,
			"second@" + testDomain,
			"expired@" + testDomain,
			"live@" + testDomain, // duplicate: accepted once
			"someone@example.com",
		}, crlf("Subject: many\n\nhello\n"))
		require.NoError(t, rcptErrs[0])
		requireCode(t, rcptErrs[1], 550)
		require.NoError(t, rcptErrs[2])
		requireCode(t, rcptErrs[3], 550)
		require.NoError(t, rcptErrs[4])
		requireCode(t, rcptErrs[5], 550)
		require.NoError(t, err)
		require.NoError(t, c.Quit())

		envs := bundle.store.deliveries()
		require.Len(t, envs, 1)
		require.Equal(t, []string{"live@" + testDomain, "second@" + testDomain}, envs[0].To)
	})

	t.Run("TooManyRecipients", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		conn := rawDial(t, bundle.addr)
		conn.cmd(t, 250, "EHLO client.example.org")
		conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
		for range 5 {
			conn.cmd(t, 250, "RCPT TO:<live@inbound.mailwatch.test>")
		}
		conn.cmd(t, 452, "RCPT TO:<second@inbound.mailwatch.test>")
		conn.cmd(t, 221, "QUIT")
	})

	t.Run("StoreErrorsAreTemporary", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		require.NoError(t, c.Mail("a@example.org"))
		requireCode(t, c.Rcpt("broken@"+testDomain), 451)

		bundle.store.mu.Lock()
		bundle.store.deliverErr = errors.New("database is down")
		bundle.store.mu.Unlock()
		_, err := send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: x\n\nx\n"))
		requireCode(t, err, 451)
		require.NoError(t, c.Quit())
	})

	t.Run("NullSender", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		conn := rawDial(t, bundle.addr)
		conn.cmd(t, 250, "EHLO client.example.org")
		conn.cmd(t, 250, "MAIL FROM:<>")
		conn.cmd(t, 250, "RCPT TO:<live@inbound.mailwatch.test>")
		conn.cmd(t, 354, "DATA")
		conn.cmd(t, 250, "Subject: bounce\r\n\r\nundeliverable\r\n.")
		conn.cmd(t, 221, "QUIT")

		envs := bundle.store.deliveries()
		require.Len(t, envs, 1)
		require.Empty(t, envs[0].From)
		require.True(t, bytes.HasPrefix(envs[0].Raw, []byte("Return-Path: <>\r\n")))
	})

	t.Run("STARTTLS", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{tls: true})

		c := dial(t, bundle.addr)
		ok, _ := c.Extension("STARTTLS")
		require.True(t, ok)
		require.NoError(t, c.StartTLS(&tls.Config{RootCAs: bundle.rootCAs, ServerName: "localhost", MinVersion: tls.VersionTLS12}))
		state, ok := c.TLSConnectionState()
		require.True(t, ok)
		require.True(t, state.HandshakeComplete)

		_, err := send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: secret\n\nover TLS\n"))
		require.NoError(t, err)
		require.NoError(t, c.Quit())

		envs := bundle.store.deliveries()
		require.Len(t, envs, 1)
		require.True(t, envs[0].TLS)
		require.Equal(t, tls.VersionName(state.Version), envs[0].TLSVersion)
		require.Equal(t, tls.CipherSuiteName(state.CipherSuite), envs[0].TLSCipher)
		require.Contains(t, envs[0].TLSVersion, "TLS 1.")
		require.Contains(t, string(envs[0].Raw), "with ESMTPS;")
	})

	t.Run("NoSTARTTLSWithoutCertificate", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		ok, _ := c.Extension("STARTTLS")
		require.False(t, ok)
		require.NoError(t, c.Quit())
	})
}

func TestShutdown(t *testing.T) {
	t.Parallel()

	t.Run("WaitsForOpenSession", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		shutdown := make(chan error, 1)
		go func() { shutdown <- bundle.srv.Shutdown(context.Background()) }()

		// Wait for the listener to close: no new connections are accepted.
		for {
			conn, err := net.Dial("tcp", bundle.addr)
			if err != nil {
				break
			}
			_ = conn.Close()
			time.Sleep(time.Millisecond)
		}

		// The open session still delivers; Shutdown returns once it quits.
		_, err := send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: x\n\nx\n"))
		require.NoError(t, err)
		select {
		case err := <-shutdown:
			t.Fatalf("Shutdown returned before the session ended: %v", err)
		default:
		}
		require.NoError(t, c.Quit())
		require.NoError(t, <-shutdown)
		require.Len(t, bundle.store.deliveries(), 1)
	})

	t.Run("ContextEndsFirst", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{})

		c := dial(t, bundle.addr)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, bundle.srv.Shutdown(ctx), context.Canceled)

		// The idle session was dropped.
		require.Error(t, c.Noop())
	})

	// A server stopped before its Serve call runs (a signal at start-up, a
	// test that ends at once) must not leave Serve accepting forever:
	// go-smtp only closes listeners it has already registered.
	for name, stop := range map[string]func(*Server) error{
		"CloseBeforeServe":    func(s *Server) error { return s.Close() },
		"ShutdownBeforeServe": func(s *Server) error { return s.Shutdown(context.Background()) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := NewServer(Config{Domain: testDomain}, newMemStore(), nil)
			require.NoError(t, err)
			require.NoError(t, stop(srv))
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			require.NoError(t, srv.Serve(l))
			_, err = net.Dial("tcp", l.Addr().String())
			require.Error(t, err, "the listener is closed")
		})
	}
}

func TestNewServer(t *testing.T) {
	t.Parallel()

	_, err := NewServer(Config{}, newMemStore(), nil)
	require.Error(t, err)
	_, err = NewServer(Config{Domain: testDomain}, nil, nil)
	require.Error(t, err)

	srv, err := NewServer(Config{Domain: testDomain}, newMemStore(), nil)
	require.NoError(t, err)
	require.Equal(t, DefaultAddr, srv.cfg.Addr)
	require.Equal(t, int64(DefaultMaxMessageBytes), srv.cfg.MaxMessageBytes)
	require.Equal(t, testDomain, srv.cfg.Hostname)
}

// rawConn is a bare textproto SMTP client, for commands net/smtp doesn't
// expose (SIZE, null sender) and for checking exact reply codes.
type rawConn struct{ *textproto.Conn }

func rawDial(t *testing.T, addr string) rawConn {
	t.Helper()
	conn, err := textproto.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, _, err = conn.ReadResponse(220)
	require.NoError(t, err)
	return rawConn{conn}
}

// cmd sends one command and requires the reply code, returning the text.
func (c rawConn) cmd(t *testing.T, code int, line string) string {
	t.Helper()
	id, err := c.Cmd("%s", line)
	require.NoError(t, err)
	c.StartResponse(id)
	defer c.EndResponse(id)
	got, msg, err := c.ReadResponse(0)
	if err != nil {
		var tpErr *textproto.Error
		require.ErrorAs(t, err, &tpErr)
	}
	require.Equal(t, code, got, "%s: %s", line, msg)
	return msg
}
