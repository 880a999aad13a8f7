package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"time"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

// Client defaults. See ClientOptions.
const (
	// DefaultTimeout bounds a whole attempt: connect, TLS, request, response
	// headers and the bounded read of the response body.
	DefaultTimeout = 15 * time.Second

	// DefaultMaxIdleConnsPerHost keeps enough kept-alive connections per
	// endpoint for high-throughput pushes: reusing a connection is ~2.5x
	// cheaper than a new TCP connection and ~20x cheaper than a new TLS one.
	DefaultMaxIdleConnsPerHost = 256

	// DefaultMaxIdleConns bounds idle connections across all endpoints.
	DefaultMaxIdleConns = 1024

	// DefaultDialTimeout bounds the TCP connect.
	DefaultDialTimeout = 10 * time.Second

	idleConnTimeout       = 90 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	maxResponseHeaderSize = 64 << 10
)

// ClientOptions tunes NewClient. The zero value gives the production
// defaults.
type ClientOptions struct {
	// Timeout bounds a whole attempt; 0 means DefaultTimeout. Tests use a
	// short one.
	Timeout time.Duration

	// DialTimeout bounds the TCP connect; 0 means DefaultDialTimeout.
	DialTimeout time.Duration

	// MaxIdleConnsPerHost is the number of idle kept-alive connections kept
	// per endpoint; 0 means DefaultMaxIdleConnsPerHost. Size it to the push
	// concurrency (River MaxWorkers of the webhooks queue).
	MaxIdleConnsPerHost int

	// MaxIdleConns bounds idle connections across endpoints; 0 means
	// DefaultMaxIdleConns.
	MaxIdleConns int

	// MaxConnsPerHost caps connections per endpoint, idle or not; 0 means no
	// cap (River's worker count is the real bound).
	MaxConnsPerHost int

	// Resolver resolves endpoint names, e.g. one built from DNS_RESOLVER; nil
	// means the system resolver. Whatever it answers, the dialer's guard
	// checks the address actually dialled.
	Resolver *net.Resolver

	// RootCAs verifies endpoint certificates; nil means the system roots.
	// Tests pass the httptest server's pool.
	RootCAs *x509.CertPool
}

// NewClient returns the dedicated HTTP client for webhook pushes:
//
//   - Timeout for the whole attempt (15 s by default);
//   - redirects are not followed: the 3xx response is returned as is, and
//     Send classifies it as a failure;
//   - no proxy, whatever HTTP_PROXY says: a proxy would dial on our behalf
//     and defeat the guard;
//   - every connection's destination address is checked by guard at dial
//     time, after DNS resolution (a nil guard refuses every non-public
//     address);
//   - keep-alives on, with many idle connections per host, HTTP/2 when the
//     endpoint offers it, TLS 1.2 at least.
//
// Share one client across all workers of a process: its connection pool is
// what makes pushes cheap.
func NewClient(guard *netguard.Guard, opts ClientOptions) *http.Client {
	timeout := valueOr(opts.Timeout, DefaultTimeout)
	dialer := guard.Dialer(&net.Dialer{
		Timeout:   valueOr(opts.DialTimeout, DefaultDialTimeout),
		KeepAlive: 30 * time.Second,
		Resolver:  opts.Resolver,
	})
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           valueOr(opts.MaxIdleConns, DefaultMaxIdleConns),
		MaxIdleConnsPerHost:    valueOr(opts.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost),
		MaxConnsPerHost:        opts.MaxConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		TLSHandshakeTimeout:    min(tlsHandshakeTimeout, timeout),
		MaxResponseHeaderBytes: maxResponseHeaderSize,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    opts.RootCAs,
		},
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func valueOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
