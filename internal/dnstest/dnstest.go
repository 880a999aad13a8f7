// Package dnstest runs a real DNS server on the loopback interface for tests
// and benchmarks. It serves zone data written as RFC 1035 section 5 master
// file text, over UDP and TCP on the same 127.0.0.1 port, and lets a test
// change records at runtime, fail or delay chosen names, and mark answers as
// DNSSEC-validated (the AD bit of RFC 4035 section 3.2.3).
//
// The server answers like a recursive resolver that has already done the
// work: it follows CNAMEs within its own data (RFC 1034 section 4.3.2),
// returns NXDOMAIN for names that do not exist and NODATA (NOERROR with an
// empty answer) for names that exist with other types, including empty
// non-terminals. Wildcards are expanded as in RFC 4592 section 3.3.1 (the
// "*" label under the closest encloser). It has no delegation and no DNSSEC
// records.
package dnstest

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// maxCNAMEChain bounds CNAME chasing so a loop in test data cannot hang the
// server.
const maxCNAMEChain = 8

type rrKey struct {
	name  string // lower-case FQDN
	rtype uint16
}

// Server is a DNS server on loopback. Its methods are safe for concurrent
// use, so parallel subtests may share one server as long as they use
// different names.
type Server struct {
	udp  *dns.Server
	tcp  *dns.Server
	addr string

	queries atomic.Int64

	mu        sync.RWMutex
	records   map[rrKey][]dns.RR
	names     map[string]bool // every owner name and its ancestors
	servfail  map[string]bool
	delay     map[string]time.Duration
	drop      map[string]bool
	truncate  map[string]bool
	authentic []string // suffixes whose answers carry the AD bit
	perName   map[string]int64
}

// Start starts a server serving the zone text (see Server.Add) and stops it
// when the test ends. It fails the test if the zone does not parse.
func Start(tb testing.TB, zone string) *Server {
	tb.Helper()
	s, err := NewServer(zone)
	if err != nil {
		tb.Fatalf("starting dns server: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// NewServer starts a server serving the zone text. Call Close to stop it.
func NewServer(zone string) (*Server, error) {
	s := &Server{
		records:  map[rrKey][]dns.RR{},
		names:    map[string]bool{},
		servfail: map[string]bool{},
		delay:    map[string]time.Duration{},
		drop:     map[string]bool{},
		truncate: map[string]bool{},
		perName:  map[string]int64{},
	}
	if err := s.Add(zone); err != nil {
		return nil, err
	}

	// Bind TCP first on a random port, then UDP on the same port; retry if
	// the UDP port happens to be taken.
	var lastErr error
	for range 10 {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("error listening on tcp: %w", err)
		}
		pc, err := net.ListenPacket("udp", tl.Addr().String())
		if err != nil {
			_ = tl.Close()
			lastErr = err
			continue
		}
		// A larger receive buffer (up to the kernel's rmem_max) keeps bursts
		// of concurrent queries from being dropped.
		if uc, ok := pc.(*net.UDPConn); ok {
			_ = uc.SetReadBuffer(4 << 20)
		}
		s.addr = tl.Addr().String()
		s.udp = &dns.Server{PacketConn: pc, Handler: s}
		s.tcp = &dns.Server{Listener: tl, Handler: s}
		udpStarted := make(chan struct{})
		tcpStarted := make(chan struct{})
		s.udp.NotifyStartedFunc = func() { close(udpStarted) }
		s.tcp.NotifyStartedFunc = func() { close(tcpStarted) }
		go func() { _ = s.udp.ActivateAndServe() }()
		go func() { _ = s.tcp.ActivateAndServe() }()
		<-udpStarted
		<-tcpStarted
		return s, nil
	}
	return nil, fmt.Errorf("error listening on udp: %w", lastErr)
}

// Addr returns the "127.0.0.1:port" address the server listens on, for both
// UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// Close stops the server.
func (s *Server) Close() error {
	return errors.Join(s.udp.Shutdown(), s.tcp.Shutdown())
}

// Queries returns the number of queries received so far, over UDP and TCP.
func (s *Server) Queries() int64 { return s.queries.Load() }

// QueriesFor returns the number of queries received for one name, any type.
func (s *Server) QueriesFor(name string) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.perName[canonical(name)]
}

// Add parses zone text in master file format (RFC 1035 section 5.1) and adds
// its records to the data served. Names without an $ORIGIN are relative to
// the root, so write them fully qualified. A record without a TTL gets 3600.
func (s *Server) Add(zone string) error {
	rrs, err := parse(zone)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rr := range rrs {
		k := rrKey{canonical(rr.Header().Name), rr.Header().Rrtype}
		s.records[k] = append(s.records[k], rr)
		s.addName(k.name)
	}
	return nil
}

// Set parses zone text like Add, but replaces the existing records of every
// name and type that appear in it, so a test can change an RRset between two
// checks.
func (s *Server) Set(zone string) error {
	rrs, err := parse(zone)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	replaced := map[rrKey]bool{}
	for _, rr := range rrs {
		k := rrKey{canonical(rr.Header().Name), rr.Header().Rrtype}
		if !replaced[k] {
			replaced[k] = true
			s.records[k] = nil
		}
		s.records[k] = append(s.records[k], rr)
		s.addName(k.name)
	}
	return nil
}

// Remove deletes the records of one name and type. The name keeps existing
// (answers NODATA) if other records or descendants exist; names are never
// forgotten once added, which is enough for tests.
func (s *Server) Remove(name string, rtype uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, rrKey{canonical(name), rtype})
}

// ServFail makes the server answer SERVFAIL for every query for name and
// the names below it.
func (s *Server) ServFail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail[canonical(name)] = true
}

// Delay makes the server wait d before answering queries for name and the
// names below it.
func (s *Server) Delay(name string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay[canonical(name)] = d
}

// Drop makes the server never answer queries for name and the names below
// it, so clients time out.
func (s *Server) Drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop[canonical(name)] = true
}

// Truncate makes UDP answers for name (and the names below it) empty with the TC bit set (RFC 1035
// section 4.1.1), so clients must retry over TCP, where the full answer is
// given.
func (s *Server) Truncate(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncate[canonical(name)] = true
}

// Authenticate sets the AD bit on answers for suffix and every name below it,
// as a validating resolver does for data it verified with DNSSEC.
func (s *Server) Authenticate(suffix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authentic = append(s.authentic, canonical(suffix))
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	m := new(dns.Msg)
	if len(req.Question) != 1 {
		m.SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := canonical(q.Name)

	s.mu.Lock()
	s.perName[name]++
	_, drop := under(s.drop, name)
	delay, _ := under(s.delay, name)
	s.mu.Unlock()
	if drop {
		return
	}
	if delay > 0 {
		time.Sleep(delay)
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	m.SetReply(req)
	m.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
	}
	if _, fail := under(s.servfail, name); fail {
		m.Rcode = dns.RcodeServerFailure
		_ = w.WriteMsg(m)
		return
	}
	_, trunc := under(s.truncate, name)
	if _, isUDP := w.RemoteAddr().(*net.UDPAddr); isUDP && trunc {
		m.Truncated = true
		_ = w.WriteMsg(m)
		return
	}
	m.AuthenticatedData = s.authenticated(name)

	cur := name
	for range maxCNAMEChain {
		if rrs := s.lookup(cur, q.Qtype); len(rrs) > 0 {
			m.Answer = append(m.Answer, rrs...)
			break
		}
		cname := s.lookup(cur, dns.TypeCNAME)
		if q.Qtype == dns.TypeCNAME || len(cname) == 0 {
			if !s.names[cur] && s.wildcard(cur) == "" {
				m.Rcode = dns.RcodeNameError
			}
			break
		}
		m.Answer = append(m.Answer, cname[0])
		cur = canonical(cname[0].(*dns.CNAME).Target)
		if _, fail := under(s.servfail, cur); fail {
			m.Answer = nil
			m.Rcode = dns.RcodeServerFailure
			break
		}
	}
	_ = w.WriteMsg(m)
}

// lookup returns the records of name and type, synthesised from a wildcard
// when name does not exist.
func (s *Server) lookup(name string, rtype uint16) []dns.RR {
	if s.names[name] {
		return s.records[rrKey{name, rtype}]
	}
	wild := s.wildcard(name)
	if wild == "" {
		return nil
	}
	var rrs []dns.RR
	for _, rr := range s.records[rrKey{wild, rtype}] {
		rr = dns.Copy(rr)
		rr.Header().Name = name
		rrs = append(rrs, rr)
	}
	return rrs
}

// wildcard returns the wildcard name that covers a name that does not exist:
// "*." plus its closest existing ancestor, if that wildcard exists.
func (s *Server) wildcard(name string) string {
	for {
		i := strings.IndexByte(name, '.')
		if i < 0 || i == len(name)-1 {
			return ""
		}
		name = name[i+1:]
		if s.names[name] {
			if wild := "*." + name; s.names[wild] {
				return wild
			}
			return ""
		}
	}
}

func (s *Server) authenticated(name string) bool {
	for _, suffix := range s.authentic {
		if dns.IsSubDomain(suffix, name) {
			return true
		}
	}
	return false
}

// addName records name and its ancestors as existing, so that empty
// non-terminals answer NODATA instead of NXDOMAIN (RFC 8020).
func (s *Server) addName(name string) {
	for {
		s.names[name] = true
		i := strings.IndexByte(name, '.')
		if i < 0 || i == len(name)-1 {
			return
		}
		name = name[i+1:]
	}
}

func parse(zone string) ([]dns.RR, error) {
	zp := dns.NewZoneParser(strings.NewReader(zone), ".", "zone")
	zp.SetIncludeAllowed(false)
	zp.SetDefaultTTL(3600)
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("error parsing zone: %w", err)
	}
	return rrs, nil
}

func canonical(name string) string {
	return strings.ToLower(dns.Fqdn(name))
}

// under returns the value for name or its closest ancestor in m.
func under[V any](m map[string]V, name string) (V, bool) {
	for {
		if v, ok := m[name]; ok {
			return v, true
		}
		i := strings.IndexByte(name, '.')
		if i < 0 || i == len(name)-1 {
			var zero V
			return zero, false
		}
		name = name[i+1:]
	}
}
