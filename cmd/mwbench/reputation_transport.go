package main

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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
	"github.com/mailwatch/mailwatch/internal/netguard"
)

const (
	transportBenchProbes      = 1000
	transportBenchConcurrency = 50
)

// benchTransportProbes is the MX half of `scripts/bench reputation`: 1,000
// MX hosts served by a loopback DNS server (A, PTR and, for every tenth
// host, a TLSA record under a validated answer), all pointing at one
// loopback go-smtp server that offers STARTTLS with a certificate from a CA
// made here; each host is probed through mxprobe (connect, EHLO, STARTTLS,
// certificate checks, EHLO, QUIT; DANE and reverse DNS), 50 at a time, with
// the SSRF guard admitting loopback only. It prints probes per second and
// the p50/p99 of one host's probe, and fails when a probe is not ok (the
// figures would then measure errors). The reputation benchmark runs it
// after its blocklist half.
func benchTransportProbes(ctx context.Context) error {
	_, err := runTransportProbes(ctx, transportBenchProbes)
	return err
}

// transportResult is what runTransportProbes measured.
type transportResult struct {
	rate     float64
	p50, p99 time.Duration
}

// transportBenchCert is the bench's test CA and the leaf it signed for
// every *.probe.bench host.
type transportBenchCert struct {
	ca, leaf       *x509.Certificate
	caDER, leafDER []byte
	key            *ecdsa.PrivateKey
}

// newTransportBenchCert makes a CA and a leaf valid for 60 days from now.
func newTransportBenchCert(now time.Time) (transportBenchCert, error) {
	var c transportBenchCert
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mwbench transport CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 90), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	if c.caDER, err = x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey); err != nil {
		return c, err
	}
	if c.ca, err = x509.ParseCertificate(c.caDER); err != nil {
		return c, err
	}
	if c.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return c, err
	}
	c.leafDER, err = x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "*.probe.bench"}, DNSNames: []string{"*.probe.bench"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 60),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, c.ca, &c.key.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	c.leaf, err = x509.ParseCertificate(c.leafDER)
	return c, err
}

// runTransportProbes probes n loopback MX hosts and prints the figures.
func runTransportProbes(ctx context.Context, n int) (transportResult, error) {
	cert, err := newTransportBenchCert(time.Now())
	if err != nil {
		return transportResult{}, err
	}

	srv := smtp.NewServer(benchNoMail{})
	srv.Domain = "mx.probe.bench"
	srv.MaxRecipients = 1
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.leafDER, cert.caDER}, PrivateKey: cert.key}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return transportResult{}, err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	spki := mxprobeSPKI(cert.leaf)
	var zone strings.Builder
	zone.WriteString("$TTL 300\n1.0.0.127.in-addr.arpa. PTR mx0.probe.bench.\n")
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("mx%d.probe.bench", i)
		fmt.Fprintf(&zone, "%s. A 127.0.0.1\n", hosts[i])
		if i%10 == 0 {
			fmt.Fprintf(&zone, "_%d._tcp.%s. TLSA 3 1 1 %s\n", port, hosts[i], spki)
		}
	}
	dns, err := dnstest.NewServer(zone.String())
	if err != nil {
		return transportResult{}, err
	}
	defer dns.Close()
	dns.Authenticate("probe.bench")

	roots := x509.NewCertPool()
	roots.AddCert(cert.ca)
	guard := netguard.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	prober, err := mxprobe.NewProber(mxprobe.Config{
		Resolver: dnscheck.NewClient(dns.Addr(), 5*time.Second), HeloName: "probe.mailwatch.bench", Port: port,
		ExtraRoots: roots, AllowAddr: guard.CheckIP,
	})
	if err != nil {
		return transportResult{}, err
	}

	durations := make([]time.Duration, len(hosts))
	verdicts := make([]mxprobe.Verdict, len(hosts))
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range transportBenchConcurrency {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				r := prober.Probe(ctx, hosts[i], []string{"*.probe.bench"})
				durations[i], verdicts[i] = time.Since(start), r.Verdict
			}
		})
	}
	for i := range hosts {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(t0)
	if err := ctx.Err(); err != nil {
		return transportResult{}, err
	}
	var bad []string
	for i, v := range verdicts {
		if v != mxprobe.VerdictOK {
			bad = append(bad, hosts[i]+": "+string(v))
		}
	}
	slices.Sort(durations)
	res := transportResult{rate: float64(len(hosts)) / elapsed.Seconds(), p50: percentile(durations, 50), p99: percentile(durations, 99)}
	fmt.Printf("MX probes (STARTTLS, certificate, DANE on 1 in 10, FCrDNS), %d hosts, %d at a time: %7.1f probes/s  p50 %6.2f ms  p99 %6.2f ms\n",
		len(hosts), transportBenchConcurrency, res.rate, ms(res.p50), ms(res.p99))
	if len(bad) > 0 {
		return res, fmt.Errorf("%d probes were not ok, e.g. %s", len(bad), bad[0])
	}
	return res, nil
}

// mxprobeSPKI is the SHA-256 of the certificate's public key, hex: the data
// of a DANE-EE(3) SPKI(1) SHA-256(1) TLSA record.
func mxprobeSPKI(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// benchNoMail is an SMTP backend that accepts no mail: the probes never
// ask for any.
type benchNoMail struct{}

func (benchNoMail) NewSession(*smtp.Conn) (smtp.Session, error) { return benchNoMailSession{}, nil }

type benchNoMailSession struct{}

var errBenchNoMail = errors.New("no mail here")

func (benchNoMailSession) Mail(string, *smtp.MailOptions) error { return errBenchNoMail }
func (benchNoMailSession) Rcpt(string, *smtp.RcptOptions) error { return errBenchNoMail }
func (benchNoMailSession) Data(io.Reader) error                 { return errBenchNoMail }
func (benchNoMailSession) Reset()                               {}
func (benchNoMailSession) Logout() error                        { return nil }
