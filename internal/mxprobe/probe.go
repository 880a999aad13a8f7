package mxprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// addressConcurrency bounds the addresses of one host probed at once.
const addressConcurrency = 4

// Prober probes MX hosts. It is safe for concurrent use.
type Prober struct {
	cfg Config
}

// NewProber returns a Prober, or an error when cfg lacks a required field.
func NewProber(cfg Config) (*Prober, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Prober{cfg: cfg}, nil
}

// Port returns the port probed.
func (p *Prober) Port() int { return p.cfg.Port }

// Probe probes one MX host: it resolves its A and AAAA records and, for each
// address, connects, reads the greeting, sends EHLO, upgrades with STARTTLS
// and checks the certificate, sends EHLO again and QUIT. It never sends MAIL
// FROM or RCPT TO. It also looks up the host's TLSA records for DANE and
// each address's reverse DNS. mxPatterns are the mx patterns of the
// domain's MTA-STS policy, or nil when it has none.
//
// Probe never fails: every outcome is in the result, whose Verdict says
// whether it is conclusive.
func (p *Prober) Probe(ctx context.Context, host string, mxPatterns []string) HostResult {
	cfg := p.cfg
	host = normalizeName(host)
	res := HostResult{Host: host, Port: cfg.Port, Problems: []Problem{}, Addresses: []AddrResult{}}
	if mxPatterns != nil {
		m := MatchesAny(mxPatterns, host)
		res.MatchesPolicy = &m
		if !m {
			res.Problems = append(res.Problems, Problem{Code: CodePolicyMismatch, Kind: KindTLS,
				Detail: fmt.Sprintf("%s matches none of the MTA-STS policy's mx patterns (%s)", host, cleanText(strings.Join(mxPatterns, ", ")))})
		}
	}
	if !validHostName(host) {
		res.Problems = addProblem(res.Problems, Problem{Code: CodeNoAddress, Kind: KindSMTP, Detail: fmt.Sprintf("%q is not a host name", cleanText(host))})
		res.Verdict = verdictOf(res.Problems)
		return res
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.TLSA = lookupTLSA(ctx, cfg.Resolver, host, cfg.Port)
	}()
	addrs, err := cfg.Resolver.LookupNetIP(ctx, "ip", host)
	wg.Wait()

	if res.TLSA.Status == TLSATemporary {
		res.Problems = addProblem(res.Problems, Problem{Code: CodeDNSTemporary, Kind: KindTemporary, Detail: "TLSA lookup: " + res.TLSA.Error})
	}
	switch {
	case dnscheck.IsNotFound(err):
		res.Problems = addProblem(res.Problems, Problem{Code: CodeNoAddress, Kind: KindSMTP, Detail: host + " has no A or AAAA record"})
	case err != nil:
		res.Problems = addProblem(res.Problems, Problem{Code: CodeDNSTemporary, Kind: KindTemporary, Detail: "address lookup: " + cleanText(err.Error())})
	}
	if len(addrs) > cfg.MaxAddresses {
		addrs = addrs[:cfg.MaxAddresses]
		res.Truncated = true
	}

	res.Addresses = make([]AddrResult, len(addrs))
	sem := make(chan struct{}, addressConcurrency)
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res.Addresses[i] = p.probeAddr(ctx, host, addr, res.TLSA)
		}()
	}
	wg.Wait()

	for _, a := range res.Addresses {
		for _, pr := range a.Problems {
			res.Problems = addProblem(res.Problems, pr)
		}
	}
	// Each code has one kind, so the union of codes gives the same verdict
	// as every problem of every address.
	res.Verdict = verdictOf(res.Problems)
	return res
}

// validHostName accepts a name to put in a TLSA query and SNI: letters,
// digits, '-', '_' (seen in the wild) and dots, within a domain name's
// length.
func validHostName(s string) bool {
	if s == "" || len(s) > maxNameLength {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// pkixCodes are the certificate findings DANE senders do not act on once a
// TLSA record matched.
var pkixCodes = []Code{CodeCertificateUntrusted, CodeCertificateSelfSigned, CodeCertificateExpired, CodeCertificateNotYetValid, CodeNameMismatch}

// probeAddr probes one address and applies DANE to the outcome.
func (p *Prober) probeAddr(ctx context.Context, host string, addr netip.Addr, tlsa TLSALookup) AddrResult {
	res := AddrResult{Addr: addr, Problems: []Problem{}}
	start := time.Now()
	chain := p.converse(ctx, host, addr, &res)
	res.Duration = time.Since(start)

	if tlsa.Published() {
		res.DANE = matchDANE(tlsa.Records, chain, host, p.cfg.Now())
		switch res.DANE.Status {
		case DANEMatched:
			// RFC 7672 section 3.1.1: with DANE-EE, name and expiry
			// checks do not apply, and with DANE-TA trust comes from the
			// record. Report the PKIX findings as notes.
			var kept []Problem
			for _, pr := range res.Problems {
				if slices.Contains(pkixCodes, pr.Code) {
					res.Notes = append(res.Notes, pr)
				} else {
					kept = append(kept, pr)
				}
			}
			res.Problems = append([]Problem{}, kept...)
		case DANEMismatch:
			res.Problems = addProblem(res.Problems, Problem{Code: CodeDANEMismatch, Kind: KindTLS,
				Detail: fmt.Sprintf("no usable TLSA record at %s matches the certificate chain presented", tlsa.Name)})
		}
	}
	if !slices.ContainsFunc(res.Problems, func(pr Problem) bool { return pr.Code == CodeNotAllowed }) {
		res.ReverseDNS = reverseDNS(ctx, p.cfg.Resolver, addr)
	}
	res.Verdict = verdictOf(res.Problems)
	return res
}

// converse runs the SMTP conversation with one address, recording problems
// in res, and returns the presented certificate chain when a TLS session
// was established.
func (p *Prober) converse(ctx context.Context, host string, addr netip.Addr, res *AddrResult) (chain []*x509.Certificate) {
	cfg := p.cfg
	add := func(code Code, kind Kind, detail string) {
		res.Problems = addProblem(res.Problems, Problem{Code: code, Kind: kind, Detail: detail})
	}
	if cfg.AllowAddr != nil {
		if err := cfg.AllowAddr(addr); err != nil {
			add(CodeNotAllowed, KindTemporary, cleanText(err.Error()))
			return nil
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.AddressTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	dialer := net.Dialer{Timeout: cfg.ConnectTimeout}
	target := netip.AddrPortFrom(addr, uint16(cfg.Port)).String()
	conn, err := dialer.DialContext(ctx, "tcp", target)
	if err != nil {
		add(CodeConnectFailed, KindTemporary, cleanText(err.Error()))
		return nil
	}
	dc := &cancellableConn{Conn: conn}
	defer dc.Close()
	stop := context.AfterFunc(ctx, dc.cancel)
	defer stop()

	s := newSession(dc, cfg.StepTimeout, deadline)
	defer s.quit()

	// Greeting (RFC 5321 section 4.3.1: 220, or 554 for "no service").
	rep, err := s.read()
	if err != nil {
		add(ioProblem(err, "reading the greeting"))
		return nil
	}
	if len(rep.Lines) > 0 {
		res.Banner = cleanText(strings.TrimSpace(fmt.Sprintf("%d %s", rep.Code, rep.Lines[0])))
	}
	switch rep.Code / 100 {
	case 2:
	case 4:
		add(CodeGreetingDeferred, KindTemporary, rep.text())
		return nil
	case 5:
		add(CodeGreetingRejected, KindSMTP, rep.text())
		return nil
	default:
		add(CodeProtocolError, KindSMTP, "unexpected greeting: "+rep.text())
		return nil
	}

	if !p.ehlo(s, add, false) {
		return nil
	}
	res.StartTLS = s.startTLSOffered
	if !res.StartTLS {
		add(CodeStartTLSNotOffered, KindTLS, "the EHLO reply does not list STARTTLS")
		return nil
	}
	rep, err = s.cmd("STARTTLS")
	if err != nil {
		add(ioProblem(err, "after STARTTLS"))
		return nil
	}
	if rep.Code != 220 {
		add(CodeStartTLSRefused, KindTLS, rep.text())
		return nil
	}

	tc, err := s.startTLS(ctx, &tls.Config{
		// SNI with the MX host name, which DANE requires (RFC 7672
		// section 8.1) and servers with several certificates need.
		ServerName: host,
		// Verification happens after the handshake, in inspectTLS; see
		// there why.
		InsecureSkipVerify: true, //nolint:gosec // verified by inspectTLS
	})
	if err != nil {
		if isTimeout(err) {
			add(CodeTimeout, KindTemporary, "during the TLS handshake: "+cleanText(err.Error()))
		} else {
			add(CodeHandshakeFailed, KindTLS, cleanText(err.Error()))
		}
		return nil
	}
	cs := tc.ConnectionState()
	info, problems := inspectTLS(cs, host, cfg.ExtraRoots, cfg.Now())
	res.TLS = info
	for _, pr := range problems {
		res.Problems = addProblem(res.Problems, pr)
	}
	chain = cs.PeerCertificates

	// RFC 3207 section 4.2: the client starts over with EHLO. A server
	// that fails here (a TLS alert, a reset) fails every sender too.
	p.ehlo(s, add, true)
	return chain
}

// ehlo sends EHLO and records the outcome; it reports whether the
// conversation can go on.
func (p *Prober) ehlo(s *session, add func(Code, Kind, string), afterTLS bool) bool {
	rep, err := s.cmd("EHLO " + p.cfg.HeloName)
	if err != nil {
		code, kind, detail := ioProblem(err, "after EHLO")
		if afterTLS && code == CodeConnectionClosed {
			code, kind, detail = CodeHandshakeFailed, KindTLS, "the TLS session failed after the handshake: "+detail
		}
		add(code, kind, detail)
		return false
	}
	switch rep.Code / 100 {
	case 2:
	case 4:
		add(CodeEHLODeferred, KindTemporary, rep.text())
		return false
	default:
		// A server without ESMTP (RFC 5321 section 3.2) still takes mail
		// after HELO, only never over TLS.
		if !afterTLS && rep.Code >= 500 && rep.Code <= 504 {
			if hrep, err := s.cmd("HELO " + p.cfg.HeloName); err == nil && hrep.Code/100 == 2 {
				s.startTLSOffered = false
				return true
			}
		}
		add(CodeEHLORejected, KindSMTP, rep.text())
		return false
	}
	s.startTLSOffered = slices.Contains(ehloExtensions(rep), "STARTTLS")
	return true
}

// ioProblem classifies an error of the conversation: timeouts and a closed
// connection are temporary (the server or a firewall may be limiting the
// prober); a reply that is not SMTP, too long or endless is a failure.
func ioProblem(err error, during string) (Code, Kind, string) {
	detail := during + ": " + cleanText(err.Error())
	switch {
	case errors.Is(err, errProtocol), errors.Is(err, errReadBudget):
		return CodeProtocolError, KindSMTP, detail
	case isTimeout(err):
		return CodeTimeout, KindTemporary, detail
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return CodeConnectionClosed, KindTemporary, detail
	}
	return CodeConnectionClosed, KindTemporary, detail
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errCancelled) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errCancelled is what a cancelled conversation's reads fail with.
var errCancelled = errors.New("probe cancelled")

// cancellableConn is a net.Conn whose deadlines stop moving once cancel was
// called: cancel sets a deadline in the past, and a later SetDeadline of a
// step cannot undo it.
type cancellableConn struct {
	net.Conn
	mu        sync.Mutex
	cancelled bool
}

var past = time.Unix(1, 0)

func (c *cancellableConn) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	_ = c.Conn.SetDeadline(past)
}

func (c *cancellableConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return errCancelled
	}
	return c.Conn.SetDeadline(t)
}

func (c *cancellableConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return errCancelled
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *cancellableConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return errCancelled
	}
	return c.Conn.SetWriteDeadline(t)
}
