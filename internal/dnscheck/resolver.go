package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Defaults for Client.
const (
	// DefaultQueryTimeout bounds one DNS exchange with the resolver.
	DefaultQueryTimeout = 2 * time.Second
	// resolvConf is where the system's resolver is configured.
	resolvConf = "/etc/resolv.conf"
	// ednsBufferSize is the UDP payload size advertised in EDNS0 (RFC 6891);
	// 1232 avoids IP fragmentation (DNS flag day 2020).
	ednsBufferSize = 1232
)

// Resolver is the DNS interface the checks use. The first three methods have
// the signatures of the same methods of *net.Resolver, and their errors are
// *net.DNSError values classified with IsNotFound (NXDOMAIN or NODATA, what RFC
// 7208 calls a void lookup) and IsTemporary/IsTimeout (timeout, SERVFAIL or
// another failure: a temperror). A temporary failure is never reported as a
// missing record.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Query returns the raw answer for one name and type, with the AD bit
	// and any CNAMEs followed, for checks that need more than the records.
	Query(ctx context.Context, name string, qtype uint16) (*Answer, error)
}

// Answer is the outcome of a successful query that found records.
type Answer struct {
	// Records are the answer-section records of the queried type.
	Records []dns.RR
	// CNAMEs are the aliases followed to reach Records, in order.
	CNAMEs []string
	// Authenticated is the AD bit of the response (RFC 4035 section 3.2.3):
	// the resolver validated the answer with DNSSEC.
	Authenticated bool
}

// Client is a Resolver that sends queries with miekg/dns to one recursive
// resolver, over UDP with a fallback to TCP when an answer is truncated (RFC
// 7766 section 5).
type Client struct {
	// Server is the resolver's "host:port".
	Server string
	// QueryTimeout bounds each exchange; zero means DefaultQueryTimeout.
	QueryTimeout time.Duration

	udp *dns.Client
	tcp *dns.Client
}

// NewClient returns a Client for the resolver at server ("host:port"; a bare
// host gets port 53).
func NewClient(server string, queryTimeout time.Duration) *Client {
	if _, _, err := net.SplitHostPort(server); err != nil {
		server = net.JoinHostPort(strings.Trim(server, "[]"), "53")
	}
	if queryTimeout <= 0 {
		queryTimeout = DefaultQueryTimeout
	}
	return &Client{
		Server:       server,
		QueryTimeout: queryTimeout,
		udp:          &dns.Client{Net: "udp", UDPSize: ednsBufferSize},
		tcp:          &dns.Client{Net: "tcp"},
	}
}

// ResolverAddress returns the resolver to use: the value of DNS_RESOLVER when
// set (passed in as env so callers control configuration), otherwise the first
// nameserver of /etc/resolv.conf.
func ResolverAddress(env string) (string, error) {
	if env != "" {
		return env, nil
	}
	conf, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return "", fmt.Errorf("error reading %s: %w", resolvConf, err)
	}
	if len(conf.Servers) == 0 {
		return "", fmt.Errorf("no nameserver in %s", resolvConf)
	}
	return net.JoinHostPort(conf.Servers[0], conf.Port), nil
}

// nxdomainText is the Err of a *net.DNSError for an NXDOMAIN answer, which
// IsNXDOMAIN tells apart from NODATA.
const nxdomainText = "no such domain (NXDOMAIN)"

// IsNXDOMAIN reports whether err means the queried name does not exist at
// all (RCODE 3, NXDOMAIN), as opposed to existing without records of the
// type asked for (NODATA). By RFC 8020 nothing exists below such a name.
func IsNXDOMAIN(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound && dnsErr.Err == nxdomainText
}

// IsNotFound reports whether err means the name or the records do not exist
// (NXDOMAIN or NODATA).
func IsNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

// Query implements Resolver.
func (c *Client) Query(ctx context.Context, name string, qtype uint16) (*Answer, error) {
	fqdn := dns.Fqdn(name)
	m := new(dns.Msg)
	m.SetQuestion(fqdn, qtype)
	m.RecursionDesired = true
	// RFC 6840 section 5.7: setting AD in a query asks for the AD bit in the
	// answer without DNSSEC records.
	m.AuthenticatedData = true
	m.SetEdns0(ednsBufferSize, false)

	resp, err := c.exchange(ctx, m)
	if err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: name, Server: c.Server, IsTimeout: isTimeout(err), IsTemporary: true}
	}
	switch resp.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return nil, &net.DNSError{Err: nxdomainText, Name: name, Server: c.Server, IsNotFound: true}
	default:
		// SERVFAIL, REFUSED and the rest: the answer is unknown, so a
		// temperror (RFC 7208 section 2.6.6).
		return nil, &net.DNSError{Err: "resolver answered " + dns.RcodeToString[resp.Rcode], Name: name, Server: c.Server, IsTemporary: true}
	}

	a := &Answer{Authenticated: resp.AuthenticatedData}
	owner := strings.ToLower(fqdn)
	for range 10 {
		found := false
		for _, rr := range resp.Answer {
			h := rr.Header()
			if h.Rrtype == dns.TypeCNAME && qtype != dns.TypeCNAME && strings.EqualFold(h.Name, owner) {
				owner = strings.ToLower(rr.(*dns.CNAME).Target)
				a.CNAMEs = append(a.CNAMEs, strings.TrimSuffix(owner, "."))
				found = true
				break
			}
		}
		if !found {
			break
		}
	}
	for _, rr := range resp.Answer {
		if rr.Header().Rrtype == qtype && strings.EqualFold(rr.Header().Name, owner) {
			a.Records = append(a.Records, rr)
		}
	}
	if len(a.Records) == 0 {
		return nil, &net.DNSError{Err: "no records of this type (NODATA)", Name: name, Server: c.Server, IsNotFound: true}
	}
	return a, nil
}

// exchange sends m over UDP, retrying once on timeout while the context
// allows, and over TCP when the answer is truncated.
func (c *Client) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				return nil, lastErr
			}
			return nil, err
		}
		qctx, cancel := context.WithTimeout(ctx, c.QueryTimeout)
		resp, _, err := c.udp.ExchangeContext(qctx, m, c.Server)
		if err == nil && resp.Truncated {
			resp, _, err = c.tcp.ExchangeContext(qctx, m, c.Server)
		}
		cancel()
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if !isTimeout(err) {
			return nil, err
		}
	}
	return nil, lastErr
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// LookupTXT implements Resolver. The character strings of one TXT record are
// concatenated without separator, as RFC 7208 section 3.3 requires.
func (c *Client) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return lookupTXT(ctx, c, name)
}

// LookupMX implements Resolver. Hosts are returned sorted by preference and
// without trailing dot; a null MX (RFC 7505) has Host ".".
func (c *Client) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return lookupMX(ctx, c, name)
}

// LookupNetIP implements Resolver. network is "ip4" (A), "ip6" (AAAA) or "ip"
// (both, queried concurrently). For "ip" the lookup is void only if both
// are, and temporary if either failed and neither found addresses.
func (c *Client) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return lookupNetIP(ctx, c, network, host)
}

// querier is the part of Resolver the Lookup methods are built on.
type querier interface {
	Query(ctx context.Context, name string, qtype uint16) (*Answer, error)
}

func lookupTXT(ctx context.Context, c querier, name string) ([]string, error) {
	a, err := c.Query(ctx, name, dns.TypeTXT)
	if err != nil {
		return nil, err
	}
	txts := make([]string, 0, len(a.Records))
	for _, rr := range a.Records {
		txts = append(txts, strings.Join(rr.(*dns.TXT).Txt, ""))
	}
	return txts, nil
}

func lookupMX(ctx context.Context, c querier, name string) ([]*net.MX, error) {
	a, err := c.Query(ctx, name, dns.TypeMX)
	if err != nil {
		return nil, err
	}
	mxs := make([]*net.MX, 0, len(a.Records))
	for _, rr := range a.Records {
		mx := rr.(*dns.MX)
		host := mx.Mx
		if host != "." {
			host = strings.TrimSuffix(host, ".")
		}
		mxs = append(mxs, &net.MX{Host: host, Pref: mx.Preference})
	}
	slices.SortStableFunc(mxs, func(a, b *net.MX) int { return int(a.Pref) - int(b.Pref) })
	return mxs, nil
}

func lookupNetIP(ctx context.Context, c querier, network, host string) ([]netip.Addr, error) {
	switch network {
	case "ip4":
		return lookupIP(ctx, c, host, dns.TypeA)
	case "ip6":
		return lookupIP(ctx, c, host, dns.TypeAAAA)
	case "ip":
	default:
		return nil, fmt.Errorf("unsupported network %q", network)
	}
	type result struct {
		addrs []netip.Addr
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		addrs, err := lookupIP(ctx, c, host, dns.TypeAAAA)
		ch <- result{addrs, err}
	}()
	v4, err4 := lookupIP(ctx, c, host, dns.TypeA)
	r6 := <-ch
	addrs := append(v4, r6.addrs...)
	switch {
	case len(addrs) > 0:
		return addrs, nil
	case err4 != nil && !IsNotFound(err4):
		return nil, err4
	case r6.err != nil && !IsNotFound(r6.err):
		return nil, r6.err
	}
	return nil, err4
}

func lookupIP(ctx context.Context, c querier, host string, qtype uint16) ([]netip.Addr, error) {
	a, err := c.Query(ctx, host, qtype)
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(a.Records))
	for _, rr := range a.Records {
		var ip net.IP
		switch rr := rr.(type) {
		case *dns.A:
			ip = rr.A
		case *dns.AAAA:
			ip = rr.AAAA
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			addrs = append(addrs, addr.Unmap())
		}
	}
	return addrs, nil
}

// IsTemporary reports whether err is a failure that says nothing about the
// records: a timeout, SERVFAIL or a cancelled context. Any error that is not
// IsNotFound is temporary.
func IsTemporary(err error) bool {
	return err != nil && !IsNotFound(err)
}

// cache is a Resolver that answers each name and type once, for the
// duration of one CheckAll: SPF, MX and MTA-STS ask for the same MX and
// address records. Concurrent askers of the same question share one query.
type cache struct {
	r  Resolver
	mu sync.Mutex
	m  map[cacheKey]*cacheEntry
}

type cacheKey struct {
	name  string
	qtype uint16
}

type cacheEntry struct {
	done chan struct{}
	a    *Answer
	err  error
}

func newCache(r Resolver) *cache {
	return &cache{r: r, m: map[cacheKey]*cacheEntry{}}
}

func (c *cache) Query(ctx context.Context, name string, qtype uint16) (*Answer, error) {
	k := cacheKey{strings.ToLower(strings.TrimSuffix(name, ".")), qtype}
	c.mu.Lock()
	e, ok := c.m[k]
	if !ok {
		e = &cacheEntry{done: make(chan struct{})}
		c.m[k] = e
	}
	c.mu.Unlock()
	if !ok {
		e.a, e.err = c.r.Query(ctx, name, qtype)
		close(e.done)
		if IsTemporary(e.err) {
			// A timeout may come from the asker's own budget; let the next
			// asker try again.
			c.mu.Lock()
			delete(c.m, k)
			c.mu.Unlock()
		}
		return e.a, e.err
	}
	select {
	case <-e.done:
		return e.a, e.err
	case <-ctx.Done():
		return nil, &net.DNSError{Err: ctx.Err().Error(), Name: name, IsTimeout: true, IsTemporary: true}
	}
}

func (c *cache) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return lookupTXT(ctx, c, name)
}

func (c *cache) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return lookupMX(ctx, c, name)
}

func (c *cache) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return lookupNetIP(ctx, c, network, host)
}
