package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// ErrNoRelay is returned by Send when SMTP_RELAY_URL is unset: mail is
// skipped (and logged by the job), never queued for later.
var ErrNoRelay = errors.New("SMTP_RELAY_URL is not set")

// Relay is the SMTP relay that outgoing notification mail goes through
// (SMTP_RELAY_URL):
//
//   - smtps://[user:pass@]host[:465]: implicit TLS (RFC 8314).
//   - smtp://[user:pass@]host[:587]: STARTTLS, required: a relay that does
//     not offer it fails the send (the job retries), so neither a password
//     nor a message crosses a network in clear. A loopback host
//     (localhost, 127.0.0.0/8, ::1) is the exception: plain SMTP to a local
//     MTA (and the tests' server), e.g. smtp://127.0.0.1:25.
//
// Credentials are sent with SASL PLAIN (percent-encoded in the URL).
type Relay struct {
	addr        string
	host        string
	implicitTLS bool
	username    string
	password    string
	// TLSConfig overrides the TLS settings (tests trust their own CA);
	// nil verifies the relay's certificate for its host name.
	TLSConfig *tls.Config
	// Timeout bounds one whole send (dial to QUIT); zero means 30 s.
	Timeout time.Duration
	// noPlainLoopback makes a loopback host use STARTTLS too (tests of
	// STARTTLS against a server on loopback).
	noPlainLoopback bool
}

// ParseRelay parses SMTP_RELAY_URL; an empty string is a nil relay.
func ParseRelay(raw string) (*Relay, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("SMTP_RELAY_URL must be a URL such as smtp://user:pass@smtp.example.com:587")
	}
	r := &Relay{host: u.Hostname()}
	port := u.Port()
	switch u.Scheme {
	case "smtp":
		if port == "" {
			port = "587"
		}
	case "smtps":
		r.implicitTLS = true
		if port == "" {
			port = "465"
		}
	default:
		return nil, errors.New("SMTP_RELAY_URL must start with smtp:// (STARTTLS) or smtps:// (implicit TLS)")
	}
	if r.host == "" {
		return nil, errors.New("SMTP_RELAY_URL has no host")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, errors.New("SMTP_RELAY_URL takes no path")
	}
	if u.User != nil {
		r.username = u.User.Username()
		r.password, _ = u.User.Password()
	}
	r.addr = net.JoinHostPort(r.host, port)
	return r, nil
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return r.addr }

func (r *Relay) loopback() bool {
	if r.noPlainLoopback {
		return false
	}
	if r.host == "localhost" {
		return true
	}
	ip := net.ParseIP(r.host)
	return ip != nil && ip.IsLoopback()
}

func (r *Relay) tlsConfig() *tls.Config {
	if r.TLSConfig != nil {
		c := r.TLSConfig.Clone()
		if c.ServerName == "" {
			c.ServerName = r.host
		}
		return c
	}
	return &tls.Config{ServerName: r.host, MinVersion: tls.VersionTLS12}
}

// Send delivers msg to every recipient in one SMTP transaction. Any error
// is temporary from the caller's point of view (the job retries), except
// a 5xx reply, which errors.As finds as *smtp.SMTPError.
func (r *Relay) Send(ctx context.Context, from string, to []string, msg []byte) error {
	if r == nil {
		return ErrNoRelay
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return fmt.Errorf("error connecting to SMTP relay: %w", err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	var c *smtp.Client
	switch {
	case r.implicitTLS:
		tc := tls.Client(conn, r.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("error in TLS handshake with SMTP relay: %w", err)
		}
		c = smtp.NewClient(tc)
	case r.loopback():
		c = smtp.NewClient(conn)
	default:
		c, err = smtp.NewClientStartTLS(conn, r.tlsConfig())
		if err != nil {
			conn.Close()
			return fmt.Errorf("error starting TLS with SMTP relay: %w", err)
		}
	}
	defer c.Close()
	if r.username != "" {
		if err := c.Auth(sasl.NewPlainClient("", r.username, r.password)); err != nil {
			return fmt.Errorf("error authenticating to SMTP relay: %w", err)
		}
	}
	if err := c.SendMail(from, to, strings.NewReader(string(msg))); err != nil {
		return fmt.Errorf("error sending through SMTP relay: %w", err)
	}
	return c.Quit()
}

// Permanent reports whether err is a permanent (5xx) SMTP reply, which
// retrying will not change.
func Permanent(err error) bool {
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code >= 500
}
