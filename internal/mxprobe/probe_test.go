package mxprobe

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbeValidCertificate(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	cert := pki.leaf(t, []string{"mx.valid.test"}, testNow.AddDate(0, 0, -30), testNow.AddDate(0, 0, 60), false)
	port, rec := startSMTP(t, &cert)

	res := newTestProber(t, r, port, pki.pool).Probe(context.Background(), "MX.Valid.Test.", []string{"*.valid.test"})
	require.Equal(t, VerdictOK, res.Verdict, "%+v", res)
	require.Equal(t, "mx.valid.test", res.Host)
	require.Equal(t, port, res.Port)
	require.Empty(t, res.Problems)
	require.NotNil(t, res.MatchesPolicy)
	require.True(t, *res.MatchesPolicy)
	require.Equal(t, TLSANone, res.TLSA.Status)
	require.Equal(t, fmt.Sprintf("_%d._tcp.mx.valid.test", port), res.TLSA.Name)
	require.Len(t, res.Addresses, 1)

	a := res.Addresses[0]
	require.Equal(t, netip.MustParseAddr("127.0.0.1"), a.Addr)
	require.Equal(t, VerdictOK, a.Verdict)
	require.True(t, a.StartTLS)
	require.True(t, strings.HasPrefix(a.Banner, "220 "), a.Banner)
	require.Nil(t, a.DANE)
	require.NotNil(t, a.TLS)
	require.True(t, a.TLS.Verified, a.TLS.VerifyError)
	require.True(t, a.TLS.NameMatches)
	require.Equal(t, "TLS 1.3", a.TLS.Version)
	require.True(t, strings.HasPrefix(a.TLS.CipherSuite, "TLS_"), a.TLS.CipherSuite)
	require.Equal(t, 60, a.TLS.DaysLeft)
	require.True(t, a.TLS.NotAfter.Equal(testNow.AddDate(0, 0, 60)))
	sum := sha256.Sum256(cert.Certificate[0])
	require.Equal(t, hex.EncodeToString(sum[:]), a.TLS.Fingerprint)
	require.Len(t, a.TLS.Chain, 1)
	require.Equal(t, []string{"mx.valid.test"}, a.TLS.Chain[0].DNSNames)
	require.Equal(t, ReverseDNS{Names: []string{"mx.valid.test"}, Confirmed: true, ConfirmedName: "mx.valid.test"}, a.ReverseDNS)

	// EHLO with the configured name, in clear and again inside TLS.
	helos, tlsSessions, _, _ := rec.snapshot()
	require.Equal(t, []string{testHelo, testHelo}, helos)
	require.Equal(t, []bool{false, true}, tlsSessions)
	assertNoMail(t, rec)

	safe, reasons := SafeToEnforce([]HostResult{res}, []string{"*.valid.test"})
	require.True(t, safe, reasons)
	safe, reasons = SafeToEnforce([]HostResult{res}, []string{"mx.other.test"})
	require.False(t, safe)
	require.Equal(t, []string{"mx.valid.test matches none of the policy's mx patterns"}, reasons)

	// The same server without the test CA in the extra pool: untrusted.
	res = newTestProber(t, r, port, nil).Probe(context.Background(), "mx.valid.test", nil)
	require.Equal(t, VerdictTLSFailing, res.Verdict)
	require.Nil(t, res.MatchesPolicy)
	require.Equal(t, []Code{CodeCertificateUntrusted}, codes(res.Addresses[0].Problems))
	require.False(t, res.Addresses[0].TLS.Verified)
	require.True(t, res.Addresses[0].TLS.NameMatches)
	assertNoMail(t, rec)
}

func TestProbeCertificateProblems(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	from := testNow.AddDate(0, 0, -30)
	cases := []struct {
		host     string
		cert     tls.Certificate
		verdict  Verdict
		codes    []Code
		daysLeft int
	}{
		{"mx.expired.test", pki.leaf(t, []string{"mx.expired.test"}, from, testNow.Add(-24*time.Hour), false),
			VerdictTLSFailing, []Code{CodeCertificateExpired}, -1},
		{"mx.wrongname.test", pki.leaf(t, []string{"mail.elsewhere.test"}, from, testNow.AddDate(0, 0, 60), false),
			VerdictTLSFailing, []Code{CodeNameMismatch}, 60},
		{"mx.selfsigned.test", selfSigned(t, []string{"mx.selfsigned.test"}, from, testNow.AddDate(0, 0, 60)),
			VerdictTLSFailing, []Code{CodeCertificateSelfSigned}, 60},
		// 5 days and 6 hours left: 5 whole days.
		{"mx.expiring.test", pki.leaf(t, []string{"mx.expiring.test"}, from, testNow.Add(5*24*time.Hour+6*time.Hour), false),
			VerdictOK, []Code{}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			t.Parallel()
			port, rec := startSMTP(t, &tc.cert)
			res := newTestProber(t, r, port, pki.pool).Probe(context.Background(), tc.host, nil)
			require.Equal(t, tc.verdict, res.Verdict, "%+v", res.Problems)
			require.Len(t, res.Addresses, 1)
			a := res.Addresses[0]
			require.Equal(t, tc.codes, codes(a.Problems), "%+v", a.Problems)
			require.NotNil(t, a.TLS)
			require.Equal(t, tc.daysLeft, a.TLS.DaysLeft)
			assertNoMail(t, rec)
		})
	}

	// The expiring certificate crosses the 7-day critical threshold.
	threshold, sev, ok := ExpiryThreshold(5)
	require.True(t, ok)
	require.Equal(t, 7, threshold)
	require.Equal(t, SeverityCritical, sev)
}

func TestProbeStartTLSNotOffered(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	port, rec := startSMTP(t, nil)
	res := newTestProber(t, r, port, nil).Probe(context.Background(), "mx.plain.test", []string{"mx.plain.test"})
	require.Equal(t, VerdictTLSFailing, res.Verdict)
	a := res.Addresses[0]
	require.Equal(t, []Code{CodeStartTLSNotOffered}, codes(a.Problems))
	require.False(t, a.StartTLS)
	require.Nil(t, a.TLS)
	helos, _, _, _ := rec.snapshot()
	require.Equal(t, []string{testHelo}, helos)
	assertNoMail(t, rec)

	safe, reasons := SafeToEnforce([]HostResult{res}, []string{"mx.plain.test"})
	require.False(t, safe)
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], "starttls_not_offered")
}

func TestProbeRejectingBanner(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	commands := make(chan string, 10)
	port := startRaw(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "554 5.7.1 mx.banner.test no service for you\r\n")
		for {
			line, err := readLine(c)
			if err != nil {
				close(commands)
				return
			}
			commands <- line
			if strings.EqualFold(line, "QUIT") {
				_, _ = io.WriteString(c, "221 bye\r\n")
			}
		}
	})
	res := newTestProber(t, r, port, nil).Probe(context.Background(), "mx.banner.test", nil)
	require.Equal(t, VerdictSMTPFailing, res.Verdict)
	a := res.Addresses[0]
	require.Equal(t, []Code{CodeGreetingRejected}, codes(a.Problems))
	require.Contains(t, a.Problems[0].Detail, "no service for you")
	require.Equal(t, "554 5.7.1 mx.banner.test no service for you", a.Banner)
	var got []string
	for line := range commands {
		got = append(got, line)
	}
	require.Equal(t, []string{"QUIT"}, got, "after a 554 greeting the probe only says QUIT")
}

func TestProbeSilentServerIsTemporary(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	port := startRaw(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	p, err := NewProber(Config{Resolver: r, HeloName: testHelo, Port: port, StepTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	res := p.Probe(context.Background(), "mx.silent.test", nil)
	require.Equal(t, VerdictTemporary, res.Verdict)
	require.Equal(t, []Code{CodeTimeout}, codes(res.Addresses[0].Problems))
}

func TestProbeClosedPortIsTemporary(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	res := newTestProber(t, r, closedPort(t), nil).Probe(context.Background(), "mx.closed.test", nil)
	require.Equal(t, VerdictTemporary, res.Verdict)
	require.Equal(t, []Code{CodeConnectFailed}, codes(res.Addresses[0].Problems))
	require.Equal(t, []Code{CodeConnectFailed}, codes(res.Problems))

	safe, _ := SafeToEnforce([]HostResult{res}, []string{"mx.closed.test"})
	require.False(t, safe, "an inconclusive probe is not safe to enforce")
}

func TestProbeCancelledContext(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	accepted := make(chan struct{})
	port := startRaw(t, func(c net.Conn) {
		close(accepted)
		_, _ = io.Copy(io.Discard, c)
	})
	p, err := NewProber(Config{Resolver: r, HeloName: testHelo, Port: port, StepTimeout: time.Hour, AddressTimeout: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-accepted
		cancel()
	}()
	// With hour-long timeouts, only the cancellation can end the probe.
	// It may land during the connect or the greeting.
	res := p.Probe(ctx, "mx.silent.test", nil)
	require.Equal(t, VerdictTemporary, res.Verdict)
	require.Len(t, res.Addresses[0].Problems, 1)
	require.Contains(t, []Code{CodeTimeout, CodeConnectFailed}, res.Addresses[0].Problems[0].Code)
}

func TestProbeHostileServersAreBounded(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	// An EHLO reply that never ends.
	endless := startRaw(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "220 mx.endless.test ESMTP\r\n")
		if _, err := readLine(c); err != nil {
			return
		}
		line := "250-" + strings.Repeat("X", 200) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	// A greeting without a line end.
	longline := startRaw(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "220 ")
		chunk := strings.Repeat("Y", 4096)
		for {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	})
	for host, port := range map[string]int{"mx.endless.test": endless, "mx.longline.test": longline} {
		res := newTestProber(t, r, port, nil).Probe(context.Background(), host, nil)
		require.Equal(t, VerdictSMTPFailing, res.Verdict, host)
		require.Equal(t, []Code{CodeProtocolError}, codes(res.Addresses[0].Problems), host)
	}
}

func TestProbeAddresses(t *testing.T) {
	t.Parallel()
	dns, r := startDNS(t)
	pki := newTestPKI(t)
	cert := pki.leaf(t, []string{"mx.dual.test"}, testNow.AddDate(0, 0, -1), testNow.AddDate(0, 1, 0), false)
	port, rec := startSMTP(t, &cert)
	p := newTestProber(t, r, port, pki.pool)

	// A and AAAA are both probed; the server listens on 127.0.0.1 only, so
	// ::1 is unreachable and the host is inconclusive, not OK.
	res := p.Probe(context.Background(), "mx.dual.test", nil)
	require.Len(t, res.Addresses, 2)
	require.Equal(t, netip.MustParseAddr("127.0.0.1"), res.Addresses[0].Addr)
	require.Equal(t, VerdictOK, res.Addresses[0].Verdict)
	require.Equal(t, netip.MustParseAddr("::1"), res.Addresses[1].Addr)
	require.Equal(t, VerdictTemporary, res.Addresses[1].Verdict)
	require.Equal(t, VerdictTemporary, res.Verdict)

	// No address at all: the MX is broken.
	res = p.Probe(context.Background(), "mx.nowhere.test", nil)
	require.Equal(t, VerdictSMTPFailing, res.Verdict)
	require.Equal(t, []Code{CodeNoAddress}, codes(res.Problems))
	require.Empty(t, res.Addresses)

	// A failing resolver: unknown.
	dns.ServFail("mx.broken.test")
	res = p.Probe(context.Background(), "mx.broken.test", nil)
	require.Equal(t, VerdictTemporary, res.Verdict)
	require.Equal(t, []Code{CodeDNSTemporary}, codes(res.Problems))

	// An address the operator does not allow is never dialled.
	guarded, err := NewProber(Config{Resolver: r, HeloName: testHelo, Port: port,
		AllowAddr: func(a netip.Addr) error { return errors.New("loopback address") }})
	require.NoError(t, err)
	res = guarded.Probe(context.Background(), "mx.valid.test", nil)
	require.Equal(t, VerdictTemporary, res.Verdict)
	require.Equal(t, []Code{CodeNotAllowed}, codes(res.Addresses[0].Problems))
	require.Equal(t, ReverseDNS{}, res.Addresses[0].ReverseDNS)
	helos, _, _, _ := rec.snapshot()
	require.Len(t, helos, 2, "only the first probe of mx.dual.test reached the server")
	assertNoMail(t, rec)
}

func TestNewProberValidates(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	for _, cfg := range []Config{
		{HeloName: testHelo},
		{Resolver: r},
		{Resolver: r, HeloName: "probe.test\r\nMAIL FROM:<x@y>"},
		{Resolver: r, HeloName: testHelo, Port: 70000},
	} {
		_, err := NewProber(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	p, err := NewProber(Config{Resolver: r, HeloName: testHelo})
	require.NoError(t, err)
	require.Equal(t, DefaultPort, p.Port())
}

func TestProbeWithoutESMTP(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	serve := func(heloReply string) func(net.Conn) {
		return func(c net.Conn) {
			_, _ = io.WriteString(c, "220 mx.plain.test old SMTP\r\n")
			for {
				line, err := readLine(c)
				if err != nil {
					return
				}
				switch verb, _, _ := strings.Cut(strings.ToUpper(line), " "); verb {
				case "EHLO":
					_, _ = io.WriteString(c, "502 5.5.1 command not implemented\r\n")
				case "HELO":
					_, _ = io.WriteString(c, heloReply+"\r\n")
				case "QUIT":
					_, _ = io.WriteString(c, "221 bye\r\n")
					return
				default:
					_, _ = io.WriteString(c, "500 what\r\n")
				}
			}
		}
	}
	// HELO works: mail flows, never encrypted.
	res := newTestProber(t, r, startRaw(t, serve("250 mx.plain.test")), nil).Probe(context.Background(), "mx.plain.test", nil)
	require.Equal(t, VerdictTLSFailing, res.Verdict)
	require.Equal(t, []Code{CodeStartTLSNotOffered}, codes(res.Problems))
	// HELO refused too: no SMTP at all.
	res = newTestProber(t, r, startRaw(t, serve("550 go away")), nil).Probe(context.Background(), "mx.plain.test", nil)
	require.Equal(t, VerdictSMTPFailing, res.Verdict)
	require.Equal(t, []Code{CodeEHLORejected}, codes(res.Problems))
}

func TestProbeStartTLSFailures(t *testing.T) {
	t.Parallel()
	_, r := startDNS(t)
	// serve answers EHLO with STARTTLS and STARTTLS with afterStartTLS.
	serve := func(afterStartTLS string) func(net.Conn) {
		return func(c net.Conn) {
			_, _ = io.WriteString(c, "220 mx.plain.test ESMTP\r\n")
			for {
				line, err := readLine(c)
				if err != nil {
					return
				}
				switch verb, _, _ := strings.Cut(strings.ToUpper(line), " "); verb {
				case "EHLO":
					_, _ = io.WriteString(c, "250-mx.plain.test\r\n250 STARTTLS\r\n")
				case "STARTTLS":
					// "|" splits what is sent at once from what is
					// sent once the client hello arrived.
					now, later, _ := strings.Cut(afterStartTLS, "|")
					_, _ = io.WriteString(c, now)
					if strings.HasPrefix(afterStartTLS, "220") {
						buf := make([]byte, 512)
						_, _ = c.Read(buf)
						_, _ = io.WriteString(c, later)
						_, _ = io.Copy(io.Discard, c)
						return
					}
				case "QUIT":
					_, _ = io.WriteString(c, "221 bye\r\n")
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name          string
		afterStartTLS string
		code          Code
		detail        string
	}{
		{"refused", "454 4.7.0 TLS not available\r\n", CodeStartTLSRefused, "TLS not available"},
		// Bytes after the 220, before the handshake: the shape of a
		// STARTTLS injection.
		{"injected", "220 go ahead\r\n250 injected\r\n", CodeHandshakeFailed, "data after the STARTTLS reply"},
		// Not TLS at all after the 220.
		{"garbage", "220 go ahead\r\n|this is not a TLS record, only text that goes on\r\n", CodeHandshakeFailed, "tls: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := newTestProber(t, r, startRaw(t, serve(tc.afterStartTLS)), nil).Probe(context.Background(), "mx.plain.test", nil)
			require.Equal(t, VerdictTLSFailing, res.Verdict, "%+v", res.Problems)
			require.Equal(t, []Code{tc.code}, codes(res.Problems), "%+v", res.Problems)
			require.Contains(t, res.Problems[0].Detail, tc.detail)
			require.True(t, res.Addresses[0].StartTLS)
			require.Nil(t, res.Addresses[0].TLS)
		})
	}
}
