package dnsfix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/mailwatch/mailwatch/internal/spf"
)

// maxFlattenQueries bounds the DNS queries one flattening makes.
const maxFlattenQueries = 60

// ErrCannotFlatten is returned when a record's lookups cannot be replaced
// by addresses without changing what it authorises.
var ErrCannotFlatten = errors.New("the record cannot be flattened")

// Flatten returns an SPF record equivalent to rec (the record of domain)
// whose include, a and mx terms are replaced by the ip4/ip6 ranges they
// resolve to now, so it needs no DNS lookups. Terms that cannot be
// resolved to addresses (exists, ptr, macros, includes whose records
// exclude addresses) are kept as they are. The result ends with rec's own
// all term. It fails with ErrCannotFlatten when rec has a redirect or when
// the result would still exceed the limits.
func Flatten(ctx context.Context, r spf.Resolver, domain, rec string) (string, error) {
	if len(rec) > MaxRecordBytes {
		return "", fmt.Errorf("%w: the record is longer than %d bytes", ErrCannotFlatten, MaxRecordBytes)
	}
	parsed, err := spf.ParseRecord(rec)
	if err != nil {
		return "", err
	}
	if parsed.Redirect != "" {
		return "", fmt.Errorf("%w: it ends in a redirect", ErrCannotFlatten)
	}
	f := &flattener{r: r}
	var terms, tail []string
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	lookups := 0
	for _, d := range parsed.Directives {
		switch {
		case d.Mechanism == "all":
			tail = append(tail, d.Raw)
		case d.Mechanism == "ip4" || d.Mechanism == "ip6":
			add(d.Raw)
		case d.Qualifier == spf.QualifierPass && (d.Mechanism == "include" || d.Mechanism == "a" || d.Mechanism == "mx"):
			nets, err := f.expand(ctx, domain, d, 0)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, errTemporary) {
					return "", err
				}
				add(d.Raw)
				lookups++
				continue
			}
			for _, n := range nets {
				add(ipTerm(n))
			}
		default:
			add(d.Raw)
			if d.LooksUpDNS() {
				lookups++
			}
		}
	}
	if lookups > spf.MaxLookups {
		return "", fmt.Errorf("%w: %d lookups remain", ErrCannotFlatten, lookups)
	}
	out := strings.Join(append(append([]string{"v=spf1"}, terms...), tail...), " ")
	if len(out) > MaxRecordBytes {
		return "", fmt.Errorf("%w: the flattened record would be %d bytes", ErrCannotFlatten, len(out))
	}
	if _, err := spf.ParseRecord(out); err != nil {
		return "", fmt.Errorf("the flattened record does not parse: %w", err)
	}
	return out, nil
}

var errTemporary = errors.New("a DNS lookup failed temporarily")

type flattener struct {
	r       spf.Resolver
	queries int
}

func (f *flattener) count() error {
	f.queries++
	if f.queries > maxFlattenQueries {
		return fmt.Errorf("%w: more than %d DNS queries", ErrCannotFlatten, maxFlattenQueries)
	}
	return nil
}

func dnsErr(err error) error {
	var de *net.DNSError
	if errors.As(err, &de) && (de.IsNotFound) {
		return fmt.Errorf("%w: %v", ErrCannotFlatten, err)
	}
	return fmt.Errorf("%w: %v", errTemporary, err)
}

// expand returns the networks a pass-qualified include, a or mx term
// matches, evaluated in domain's context.
func (f *flattener) expand(ctx context.Context, domain string, d spf.Directive, depth int) ([]netip.Prefix, error) {
	if depth > 5 {
		return nil, fmt.Errorf("%w: includes nest too deep", ErrCannotFlatten)
	}
	target := d.DomainSpec
	if target == "" {
		target = domain
	}
	if strings.Contains(target, "%") {
		return nil, fmt.Errorf("%w: %s uses a macro", ErrCannotFlatten, d.Raw)
	}
	switch d.Mechanism {
	case "a":
		return f.addrs(ctx, target, d)
	case "mx":
		if err := f.count(); err != nil {
			return nil, err
		}
		mxs, err := f.r.LookupMX(ctx, target)
		if err != nil {
			return nil, dnsErr(err)
		}
		var out []netip.Prefix
		for _, mx := range mxs {
			nets, err := f.addrs(ctx, strings.TrimSuffix(mx.Host, "."), d)
			if err != nil {
				return nil, err
			}
			out = append(out, nets...)
		}
		return out, nil
	case "include":
		if err := f.count(); err != nil {
			return nil, err
		}
		txts, err := f.r.LookupTXT(ctx, target)
		if err != nil {
			return nil, dnsErr(err)
		}
		var recs []string
		for _, t := range txts {
			if spf.IsSPF(t) {
				recs = append(recs, t)
			}
		}
		if len(recs) != 1 {
			return nil, fmt.Errorf("%w: %s has %d SPF records", ErrCannotFlatten, target, len(recs))
		}
		inc, err := spf.ParseRecord(recs[0])
		if err != nil || inc.Redirect != "" {
			return nil, fmt.Errorf("%w: %s's record cannot be inlined", ErrCannotFlatten, target)
		}
		var out []netip.Prefix
		for _, sub := range inc.Directives {
			switch {
			case sub.Mechanism == "all":
				// An include matches only when its record passes; its
				// all term decides nothing for the includer unless +all.
				if sub.Qualifier == spf.QualifierPass {
					return nil, fmt.Errorf("%w: %s passes everything", ErrCannotFlatten, target)
				}
			case sub.Qualifier != spf.QualifierPass:
				return nil, fmt.Errorf("%w: %s excludes addresses (%s)", ErrCannotFlatten, target, sub.Raw)
			case sub.Mechanism == "ip4" || sub.Mechanism == "ip6":
				out = append(out, sub.Network)
			case sub.Mechanism == "include" || sub.Mechanism == "a" || sub.Mechanism == "mx":
				nets, err := f.expand(ctx, target, sub, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, nets...)
			default:
				return nil, fmt.Errorf("%w: %s uses %s", ErrCannotFlatten, target, sub.Mechanism)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrCannotFlatten, d.Raw)
}

func (f *flattener) addrs(ctx context.Context, host string, d spf.Directive) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, network := range []string{"ip4", "ip6"} {
		if err := f.count(); err != nil {
			return nil, err
		}
		ips, err := f.r.LookupNetIP(ctx, network, host)
		if err != nil {
			var de *net.DNSError
			if errors.As(err, &de) && de.IsNotFound {
				continue
			}
			return nil, dnsErr(err)
		}
		for _, ip := range ips {
			ip = ip.Unmap()
			bits := ip.BitLen()
			if ip.Is4() && d.IP4CIDR >= 0 {
				bits = d.IP4CIDR
			}
			if ip.Is6() && d.IP6CIDR >= 0 {
				bits = d.IP6CIDR
			}
			p, err := ip.Prefix(bits)
			if err == nil && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func ipTerm(p netip.Prefix) string {
	kind := "ip4:"
	if p.Addr().Is6() {
		kind = "ip6:"
	}
	if p.Bits() == p.Addr().BitLen() {
		return kind + p.Addr().String()
	}
	return kind + p.String()
}
