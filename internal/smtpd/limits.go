package smtpd

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Connection limits. Each open session costs buffers and a goroutine (about
// 90 KiB for a client that stops mid-line), so the listener bounds them in
// total and per client address, and bounds how long one may last.
const (
	// DefaultMaxConnections caps the open sessions of a listener.
	DefaultMaxConnections = 1000
	// DefaultMaxConnectionsPerIP caps the open sessions of one client
	// address (an IPv6 client's /64, which one host usually holds).
	DefaultMaxConnectionsPerIP = 20
	// DefaultSessionTimeout bounds a whole session, whatever it sends:
	// trickled bytes and keep-alive commands cannot extend it.
	DefaultSessionTimeout = 10 * time.Minute

	// refusalWriteTimeout bounds writing the 421 to a refused connection,
	// which happens on the accepting goroutine.
	refusalWriteTimeout = time.Second
	// closingWriteGrace lets the reply that ends a session past its
	// deadline (421) still be written.
	closingWriteGrace = 5 * time.Second
)

// connLimits counts open sessions in total and per client key.
type connLimits struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[netip.Prefix]int
}

func newConnLimits(max, perClient int) *connLimits {
	return &connLimits{max: max, perClient: min(perClient, max), byClient: make(map[netip.Prefix]int)}
}

// acquire takes a place for client, or returns the refusal's reason. The
// release func gives the place back; it must be called once.
func (l *connLimits) acquire(client netip.Prefix) (release func(), refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return nil, "Too many connections, try again later"
	case l.byClient[client] >= l.perClient:
		return nil, "Too many connections from your address, try again later"
	}
	l.total++
	l.byClient[client]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.total--
		if l.byClient[client]--; l.byClient[client] <= 0 {
			delete(l.byClient, client)
		}
	}, ""
}

// clientKey is what the per-client cap counts: the IPv4 address, or the
// /64 of an IPv6 address. An address that cannot be parsed (not TCP)
// counts as one client.
func clientKey(addr net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// limitListener hands go-smtp only the connections within the caps; the
// others get 421 4.7.0 (RFC 5321 section 3.8, RFC 3463 "delivery not
// authorized") and are closed at once.
type limitListener struct {
	net.Listener
	srv *Server
}

// Accept returns the next connection within the caps, wrapped in its
// session deadline.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release, refusal := l.srv.limits.acquire(clientKey(c.RemoteAddr()))
		if refusal != "" {
			l.srv.refuse(c, refusal)
			continue
		}
		return newSessionConn(c, time.Now(), l.srv.cfg.SessionTimeout, l.srv.cfg.ReadTimeout, release), nil
	}
}

// refuse answers a connection over a cap and closes it. The log line is a
// warning so that a flood is seen (the production logger throttles it).
func (s *Server) refuse(c net.Conn, reason string) {
	s.logger.Warn("SMTP connection refused", "remote_addr", c.RemoteAddr().String(), "reason", reason)
	_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
	_, _ = fmt.Fprintf(c, "421 4.7.0 %s %s\r\n", s.cfg.Hostname, reason)
	_ = c.Close()
}

// sessionConn is a session's connection. It keeps every read and write
// deadline go-smtp sets within the session's bounds, so neither can be
// pushed past them by a client that keeps sending:
//
//   - reads end at the session deadline (start + SessionTimeout), and
//     ReadTimeout after the session last made progress (an accepted MAIL or
//     RCPT, message data). NOOP, RSET, HELO and refused commands are not
//     progress, so they do not restart it as each command line otherwise
//     would;
//   - writes end shortly after the session deadline, so the closing reply
//     still goes out.
type sessionConn struct {
	net.Conn
	end  time.Time
	idle time.Duration
	// progress is when the session last made progress, in Unix nanoseconds.
	progress atomic.Int64

	once    sync.Once
	release func()
}

func newSessionConn(c net.Conn, start time.Time, session, idle time.Duration, release func()) *sessionConn {
	sc := &sessionConn{Conn: c, end: start.Add(session), idle: idle, release: release}
	sc.progress.Store(start.UnixNano())
	_ = sc.SetReadDeadline(time.Time{})
	_ = sc.SetWriteDeadline(time.Time{})
	return sc
}

func (c *sessionConn) readLimit(t time.Time) time.Time {
	limit := time.Unix(0, c.progress.Load()).Add(c.idle)
	if c.end.Before(limit) {
		limit = c.end
	}
	if t.IsZero() || t.After(limit) {
		return limit
	}
	return t
}

func (c *sessionConn) writeLimit(t time.Time) time.Time {
	limit := c.end.Add(closingWriteGrace)
	if t.IsZero() || t.After(limit) {
		return limit
	}
	return t
}

// SetReadDeadline sets t, or the session's read bound if that is sooner.
func (c *sessionConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.readLimit(t))
}

// SetWriteDeadline sets t, or the session's write bound if that is sooner.
func (c *sessionConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.writeLimit(t))
}

// SetDeadline sets both deadlines within the session's bounds.
func (c *sessionConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// Close gives the session's place back, then closes the connection: once
// the client sees the close, a new connection finds the place free.
func (c *sessionConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// madeProgress restarts the idle bound of the session on c (the
// connection go-smtp serves: a sessionConn, or TLS over one).
func madeProgress(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if sc, ok := c.(*sessionConn); ok {
		sc.progress.Store(time.Now().UnixNano())
	}
}
