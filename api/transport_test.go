package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/transport"
	"github.com/mailwatch/mailwatch/jobs"
)

// expiredMX runs a go-smtp server on 127.0.0.1 offering STARTTLS with a
// certificate for host, issued by a CA made here and expired two days ago;
// it returns the port and the CA pool.
func expiredMX(t *testing.T, host string) (int, *x509.CertPool) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "transport e2e CA"},
		NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(1, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, NotBefore: now.AddDate(0, -3, 0), NotAfter: now.AddDate(0, 0, -2),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	srv := smtp.NewServer(noMailBackend{})
	srv.Domain = host
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return ln.Addr().(*net.TCPAddr).Port, pool
}

type noMailBackend struct{}

func (noMailBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return noMailSession{}, nil }

type noMailSession struct{}

var errNoMailHere = &smtp.SMTPError{Code: 550, Message: "no mail here"}

func (noMailSession) Mail(string, *smtp.MailOptions) error { return errNoMailHere }
func (noMailSession) Rcpt(string, *smtp.RcptOptions) error { return errNoMailHere }
func (noMailSession) Data(io.Reader) error                 { return errNoMailHere }
func (noMailSession) Reset()                               {}
func (noMailSession) Logout() error                        { return nil }

// TestTransportEndToEnd: a domain created through the API is checked by a
// River worker (its MX comes from the loopback DNS server); POST
// .../transport/check queues a probe that the worker runs against a
// loopback SMTP server presenting an expired certificate; GET
// .../transport shows the failing host with its problems, and one
// mx_tls_failing was raised. Another account's domain is a 404, and a
// server with SMTP_PROBE=off answers the check with 409.
func TestTransportEndToEnd(t *testing.T) {
	t.Parallel()
	const name = "trn-e2e.test"
	ctx := context.Background()
	srv := dnstest.Start(t, `
trn-e2e.test.    MX 10 mx.trn-e2e.test.
mx.trn-e2e.test. A 127.0.0.1
1.0.0.127.in-addr.arpa. PTR mx.trn-e2e.test.
`)
	resolver := dnscheck.NewClient(srv.Addr(), 2*time.Second)
	port, roots := expiredMX(t, "mx."+name)
	prober, err := mxprobe.NewProber(mxprobe.Config{Resolver: resolver, HeloName: "probe.mailwatch.test", Port: port,
		StepTimeout: 5 * time.Second, ExtraRoots: roots, AllowAddr: testGuard(t).CheckIP})
	require.NoError(t, err)

	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.Resolver, d.SMTPProbe = resolver, true }
	})
	worker, err := jobs.NewClient(jobs.Deps{
		Pool: pool, Logger: slog.New(slog.DiscardHandler), Resolver: resolver,
		Settings:  jobs.Settings{DNSCheckInterval: time.Hour, EventRetentionDays: 90, HealthHistoryDays: 90},
		Transport: &transport.Service{Prober: prober, Emitter: &events.Emitter{}},
	}, jobs.Options{Concurrency: 4, Queues: []string{queues.Default, queues.DNS, queues.Transport}})
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(stopCtx)
	})

	acct := b.createAccount(t)
	createDomain(t, b, acct.Key, name)
	eventually(t, 30*time.Second, "the first DNS check", func() bool {
		var d api.DomainDetail
		b.do(t, "GET", "/api/accounts/me/domains/"+name, acct.Key, nil).JSON(t, &d)
		return d.Checks["mx"] == "pass"
	})

	var before api.Transport
	resp := b.do(t, "GET", "/api/accounts/me/domains/"+name+"/transport", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &before)
	require.True(t, before.ProbeEnabled)
	require.Empty(t, before.Hosts, "nothing probed yet")
	require.Nil(t, before.ProbedAt)

	healthJobs := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'domain_health'
			AND args->>'domain_id' = (SELECT id::text FROM domains WHERE name = $1)`, name).Scan(&n))
		return n
	}
	healthBefore := healthJobs()
	resp = b.do(t, "POST", "/api/accounts/me/domains/"+name+"/transport/check", acct.Key, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var queued api.TransportCheck
	resp.JSON(t, &queued)
	require.NotZero(t, queued.JobID)

	var got api.Transport
	eventually(t, 30*time.Second, "the probe's results", func() bool {
		b.do(t, "GET", "/api/accounts/me/domains/"+name+"/transport", acct.Key, nil).JSON(t, &got)
		return len(got.Hosts) > 0
	})
	require.Len(t, got.Hosts, 1)
	h := got.Hosts[0]
	require.Equal(t, "mx."+name, h.MXHost)
	require.Equal(t, "tls_failing", h.Verdict)
	require.Len(t, h.Addresses, 1)
	a := h.Addresses[0]
	require.Equal(t, "127.0.0.1", a.Address)
	require.Equal(t, int32(port), a.Port)
	require.True(t, a.StartTLS)
	require.NotNil(t, a.Verified)
	require.False(t, *a.Verified)
	require.True(t, *a.NameMatches)
	require.Less(t, *a.DaysLeft, int32(0))
	require.True(t, a.FCrDNS)
	var codes []string
	for _, p := range a.Problems {
		codes = append(codes, p.Code)
	}
	require.Contains(t, codes, "certificate_expired")
	require.NotNil(t, got.ProbedAt)
	// The stored results move the health cap: the probe queues the
	// domain's health recompute.
	eventually(t, 30*time.Second, "the health recompute the probe queues", func() bool {
		return healthJobs() > healthBefore
	})

	failing := domainEvents(t, pool, acct.ID, "mx_tls_failing")
	require.Len(t, failing, 1)
	require.Equal(t, "warning", failing[0].Severity, "no MTA-STS enforce, no DANE")
	require.Equal(t, "mx."+name, failing[0].Payload["mx_host"])
	expiring := domainEvents(t, pool, acct.ID, "certificate_expiring")
	require.Len(t, expiring, 1, "an expired certificate is at the 7-day threshold")
	require.Equal(t, "critical", expiring[0].Severity)

	// The dashboard's domain page shows the host in its Mail servers section.
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	webResp, page := w.req("GET", "/domains/"+name, nil)
	require.Equal(t, http.StatusOK, webResp.StatusCode)
	require.Contains(t, page, "Mail servers (MX transport)")
	require.Contains(t, page, "<td>mx."+name+"</td>")
	require.Contains(t, page, `<span class="problem">certificate_expired</span>`)

	// Another account's domain does not exist for it.
	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/accounts/me/domains/"+name+"/transport", other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/accounts/me/domains/"+name+"/transport/check", other.Key, nil).Status)

	// SMTP_PROBE=off: the check is refused and says why.
	off := setup(t, func(o *setupOpts) { o.db = pool })
	offAcct := off.createAccount(t)
	createDomain(t, off, offAcct.Key, "off-"+name)
	resp = off.do(t, "POST", "/api/accounts/me/domains/off-"+name+"/transport/check", offAcct.Key, nil)
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "SMTP_PROBE=off")
}
