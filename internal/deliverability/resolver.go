package deliverability

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/mjl-/adns"
	moxdns "github.com/mjl-/mox/dns"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// budgetResolver wraps the caller's resolver: each query takes one unit of
// the analysis's budget (MaxDNSLookups) and runs under LookupTimeout. A
// query over budget fails as a temporary error, which every check reports
// as temperror, never as a missing record.
type budgetResolver struct {
	r       Resolver
	max     int64
	timeout contextTimeout
	n       atomic.Int64
}

// contextTimeout derives a lookup's context.
type contextTimeout func(ctx context.Context) (context.Context, context.CancelFunc)

var (
	_ dnscheck.Resolver = (*budgetResolver)(nil)
	_ spf.PTRResolver   = (*budgetResolver)(nil)
)

func newBudgetResolver(r Resolver, lim Limits) *budgetResolver {
	return &budgetResolver{
		r:   r,
		max: int64(lim.MaxDNSLookups),
		timeout: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, lim.LookupTimeout)
		},
	}
}

// errBudget is the Err of the *net.DNSError a query over budget gets.
const errBudget = "DNS lookup budget of this analysis spent"

// take spends n queries, or returns the error of a query over budget.
func (b *budgetResolver) take(name string, n int64) error {
	if b.n.Add(n) > b.max {
		return &net.DNSError{Err: errBudget, Name: name, IsTemporary: true}
	}
	return nil
}

// used returns the queries made (at most the budget).
func (b *budgetResolver) used() int {
	return int(min(b.n.Load(), b.max))
}

func (b *budgetResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if err := b.take(name, 1); err != nil {
		return nil, err
	}
	ctx, cancel := b.timeout(ctx)
	defer cancel()
	return b.r.LookupTXT(ctx, name)
}

func (b *budgetResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	if err := b.take(name, 1); err != nil {
		return nil, err
	}
	ctx, cancel := b.timeout(ctx)
	defer cancel()
	return b.r.LookupMX(ctx, name)
}

func (b *budgetResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	n := int64(1)
	if network == "ip" {
		n = 2 // A and AAAA
	}
	if err := b.take(host, n); err != nil {
		return nil, err
	}
	ctx, cancel := b.timeout(ctx)
	defer cancel()
	return b.r.LookupNetIP(ctx, network, host)
}

func (b *budgetResolver) Query(ctx context.Context, name string, qtype uint16) (*dnscheck.Answer, error) {
	if err := b.take(name, 1); err != nil {
		return nil, err
	}
	ctx, cancel := b.timeout(ctx)
	defer cancel()
	return b.r.Query(ctx, name, qtype)
}

// LookupAddr returns the PTR names of addr, without trailing dots.
func (b *budgetResolver) LookupAddr(ctx context.Context, addr netip.Addr) ([]string, error) {
	a, err := b.Query(ctx, spf.ReverseName(addr), dns.TypePTR)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, rr := range a.Records {
		if ptr, ok := rr.(*dns.PTR); ok {
			names = append(names, strings.ToLower(strings.TrimSuffix(ptr.Ptr, ".")))
		}
	}
	return names, nil
}

// moxResolver adapts the budget resolver to the DKIM verifier's resolver
// interface. The verifier only asks for TXT records.
type moxResolver struct{ b *budgetResolver }

var _ moxdns.Resolver = moxResolver{}

var errUnsupported = errors.New("lookup not used by the DKIM verifier")

func (m moxResolver) LookupTXT(ctx context.Context, name string) ([]string, adns.Result, error) {
	txts, err := m.b.LookupTXT(ctx, name)
	return txts, adns.Result{}, err
}

func (moxResolver) LookupPort(context.Context, string, string) (int, error) {
	return 0, errUnsupported
}

func (moxResolver) LookupAddr(context.Context, string) ([]string, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupCNAME(context.Context, string) (string, adns.Result, error) {
	return "", adns.Result{}, errUnsupported
}

func (moxResolver) LookupHost(context.Context, string) ([]string, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupIP(context.Context, string, string) ([]net.IP, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupMX(context.Context, string) ([]*net.MX, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupNS(context.Context, string) ([]*net.NS, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, adns.Result, error) {
	return "", nil, adns.Result{}, errUnsupported
}

func (moxResolver) LookupTLSA(context.Context, int, string, string) ([]adns.TLSA, adns.Result, error) {
	return nil, adns.Result{}, errUnsupported
}
