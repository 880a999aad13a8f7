package transport_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/transport"
	"github.com/mailwatch/mailwatch/jobs"
)

// Certificates are made by the test, relative to this fixed clock.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type testPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "transport test CA"},
		NotBefore: testNow.AddDate(-1, 0, 0), NotAfter: testNow.AddDate(5, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testPKI{cert: cert, key: key, pool: pool}
}

// leaf issues a server certificate for names, valid until notAfter.
func (p *testPKI) leaf(t testing.TB, names []string, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: testNow.AddDate(0, -2, 0), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der, p.cert.Raw}, PrivateKey: key, Leaf: leaf}
}

func spkiSHA256(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// recorder counts MAIL and RCPT commands: a probe must send none.
type recorder struct {
	mu          sync.Mutex
	mails, rcpt int
}

func (r *recorder) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{r: r}, nil }

type session struct{ r *recorder }

var errNoMail = &smtp.SMTPError{Code: 550, Message: "no mail here"}

func (s *session) Mail(string, *smtp.MailOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.mails++
	return errNoMail
}

func (s *session) Rcpt(string, *smtp.RcptOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.rcpt++
	return errNoMail
}

func (s *session) Data(io.Reader) error { return errNoMail }
func (s *session) Reset()               {}
func (s *session) Logout() error        { return nil }

// startSMTP runs a go-smtp server on 127.0.0.1 offering STARTTLS with cert
// and returns its port.
func startSMTP(t testing.TB, cert tls.Certificate) (int, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := smtp.NewServer(rec)
	srv.Domain = "mx.test"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, rec
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

// clock is a settable clock shared by the prober and the service.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// loopbackGuard admits 127.0.0.1, which the SSRF guard refuses by default.
var loopbackGuard = netguard.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})

// newService returns a Service probing port through r, trusting pki, on
// clk, with the loopback guard.
func newService(t testing.TB, r dnscheck.Resolver, port int, pki *testPKI, clk *clock, guard *netguard.Guard) *transport.Service {
	t.Helper()
	p, err := mxprobe.NewProber(mxprobe.Config{
		Resolver: r, HeloName: "probe.mailwatch.test", Port: port, StepTimeout: 2 * time.Second,
		ExtraRoots: pki.pool, Now: clk.Now, AllowAddr: guard.CheckIP,
	})
	require.NoError(t, err)
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	return &transport.Service{Prober: p, Emitter: &events.Emitter{River: client}, Now: clk.Now}
}

// storeResults gives the domain stored DNS check results naming its MX
// hosts and, when mode is set, an MTA-STS policy covering them.
func storeResults(t testing.TB, db dbutil.Executor, domainID uuid.UUID, mode string, hosts ...string) dbsqlc.Domain {
	t.Helper()
	rs := dnscheck.Results{MX: &dnscheck.MXResult{Result: dnscheck.Result{Status: dnscheck.StatusPass}}}
	for i, h := range hosts {
		rs.MX.Hosts = append(rs.MX.Hosts, dnscheck.MXHost{Host: h, Preference: uint16(10 * (i + 1)), Addresses: []string{"127.0.0.1"}})
	}
	if mode != "" {
		rs.MTASTS = &dnscheck.MTASTSResult{Result: dnscheck.Result{Status: dnscheck.StatusPass},
			Policy: &dnscheck.STSPolicy{Mode: mode, MaxAge: 604800, MX: hosts}}
	}
	b, err := json.Marshal(rs)
	require.NoError(t, err)
	_, err = db.Exec(context.Background(), `UPDATE domains SET results = $2, checked_at = now() WHERE id = $1`, domainID, b)
	require.NoError(t, err)
	d, err := dbsqlc.New().DomainGetByID(context.Background(), db, domainID)
	require.NoError(t, err)
	return d
}

// eventsOf returns the account's events of type typ, oldest first.
func eventsOf(t testing.TB, db dbutil.Executor, account uuid.UUID, typ string) []dbsqlc.Event {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, severity, payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY id`, account, typ)
	require.NoError(t, err)
	defer rows.Close()
	var out []dbsqlc.Event
	for rows.Next() {
		var e dbsqlc.Event
		require.NoError(t, rows.Scan(&e.ID, &e.Severity, &e.Payload))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func storedRows(t testing.TB, db dbutil.Executor, account, domain uuid.UUID) []dbsqlc.MxProbeResult {
	t.Helper()
	rows, err := dbsqlc.New().TransportResultsByDomain(context.Background(), db,
		dbsqlc.TransportResultsByDomainParams{AccountID: account, DomainID: domain})
	require.NoError(t, err)
	return rows
}

func itoa(n int) string { return strconv.Itoa(n) }
