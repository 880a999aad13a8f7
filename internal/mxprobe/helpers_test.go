package mxprobe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// testNow is the fixed clock of every test: certificate validity is set
// relative to it, whatever the real date.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const testHelo = "probe.mailwatch.test"

// testPKI is a CA made by the test, trusted through Config.ExtraRoots.
type testPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func nextSerial() *big.Int {
	return big.NewInt(serial.Add(1))
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: "mxprobe test CA"},
		NotBefore:             testNow.AddDate(-1, 0, 0),
		NotAfter:              testNow.AddDate(5, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testPKI{cert: cert, key: key, pool: pool}
}

// leaf issues a server certificate for names, valid from notBefore to
// notAfter; withCA appends the CA to the presented chain.
func (p *testPKI) leaf(t testing.TB, names []string, notBefore, notAfter time.Time, withCA bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := leafTemplate(names, notBefore, notAfter)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	require.NoError(t, err)
	chain := [][]byte{der}
	if withCA {
		chain = append(chain, p.cert.Raw)
	}
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}
}

// selfSigned makes a self-signed server certificate for names.
func selfSigned(t testing.TB, names []string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := leafTemplate(names, notBefore, notAfter)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func leafTemplate(names []string, notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: names[0]},
		Issuer:       pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

// recorder is what the SMTP test servers saw: EHLO names, and any MAIL or
// RCPT command (there must be none).
type recorder struct {
	mu    sync.Mutex
	helos []string
	tls   []bool
	mails []string
	rcpts []string
}

func (r *recorder) snapshot() (helos []string, tlsSessions []bool, mails, rcpts []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.helos...), append([]bool(nil), r.tls...), append([]string(nil), r.mails...), append([]string(nil), r.rcpts...)
}

// NewSession implements smtp.Backend. go-smtp calls it on EHLO, before it
// answers, so the probe cannot return before the name is recorded.
func (r *recorder) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.helos = append(r.helos, c.Hostname())
	r.tls = append(r.tls, isTLS)
	return &refusingSession{r: r}, nil
}

// refusingSession refuses all mail.
type refusingSession struct{ r *recorder }

var errNoMail = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "this test server accepts no mail"}

func (s *refusingSession) Mail(from string, _ *smtp.MailOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.mails = append(s.r.mails, from)
	return errNoMail
}

func (s *refusingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.rcpts = append(s.r.rcpts, to)
	return errNoMail
}

func (s *refusingSession) Data(io.Reader) error { return errNoMail }
func (s *refusingSession) Reset()               {}
func (s *refusingSession) Logout() error        { return nil }

// startSMTP runs a go-smtp server on 127.0.0.1 offering STARTTLS with cert
// (nil: no STARTTLS) and returns its port and recorder.
func startSMTP(t testing.TB, cert *tls.Certificate) (int, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := smtp.NewServer(rec)
	srv.Domain = "mx.test"
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, rec
}

// startRaw runs a TCP listener on 127.0.0.1 that hands each accepted
// connection to serve, and returns its port.
func startRaw(t testing.TB, serve func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// zone is the DNS data of the tests: every MX host resolves to 127.0.0.1,
// and 127.0.0.1's PTR confirms as mx.valid.test.
const zone = `
mx.valid.test.       A 127.0.0.1
mx.expired.test.     A 127.0.0.1
mx.wrongname.test.   A 127.0.0.1
mx.selfsigned.test.  A 127.0.0.1
mx.expiring.test.    A 127.0.0.1
mx.plain.test.       A 127.0.0.1
mx.banner.test.      A 127.0.0.1
mx.silent.test.      A 127.0.0.1
mx.closed.test.      A 127.0.0.1
mx.endless.test.     A 127.0.0.1
mx.longline.test.    A 127.0.0.1
mx.dual.test.        A 127.0.0.1
mx.dual.test.        AAAA ::1
mx.nowhere.test.     TXT "no address"
mx.dane.test.        A 127.0.0.1
mx.danebad.test.     A 127.0.0.1
mx.roll.test.        A 127.0.0.1
mx.danese.test.      A 127.0.0.1
mx.daneta.test.      A 127.0.0.1
mx.unsigned.test.    A 127.0.0.1
mx.pkix.test.        A 127.0.0.1
1.0.0.127.in-addr.arpa. PTR mx.valid.test.
`

func startDNS(t testing.TB) (*dnstest.Server, dnscheck.Resolver) {
	t.Helper()
	srv := dnstest.Start(t, zone)
	return srv, dnscheck.NewClient(srv.Addr(), 2*time.Second)
}

// newTestProber returns a Prober for port with the test's clock, CA and a
// short step timeout.
func newTestProber(t testing.TB, r dnscheck.Resolver, port int, roots *x509.CertPool) *Prober {
	t.Helper()
	p, err := NewProber(Config{
		Resolver:    r,
		HeloName:    testHelo,
		Port:        port,
		StepTimeout: 2 * time.Second,
		ExtraRoots:  roots,
		Now:         func() time.Time { return testNow },
	})
	require.NoError(t, err)
	return p
}

func codes(ps []Problem) []Code {
	out := []Code{}
	for _, p := range ps {
		out = append(out, p.Code)
	}
	return out
}

// assertNoMail checks that no server saw MAIL FROM or RCPT TO.
func assertNoMail(t testing.TB, recs ...*recorder) {
	t.Helper()
	for _, r := range recs {
		_, _, mails, rcpts := r.snapshot()
		require.Empty(t, mails, "the probe sent MAIL FROM")
		require.Empty(t, rcpts, "the probe sent RCPT TO")
	}
}

// readLine reads one command line from a raw test connection.
func readLine(c net.Conn) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < 4096 {
		if _, err := c.Read(buf); err != nil {
			return b.String(), err
		}
		if buf[0] == '\n' {
			return strings.TrimSuffix(b.String(), "\r"), nil
		}
		b.WriteByte(buf[0])
	}
	return b.String(), errors.New("line too long")
}
