package mxprobe

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// maxPTRNames caps the PTR names followed forward per address.
const maxPTRNames = 8

// ReverseDNS is the forward-confirmed reverse DNS of an address: its PTR
// names, and whether one of them resolves back to it (the iprev check of
// RFC 8601 section 3).
type ReverseDNS struct {
	// Names are the PTR names, without trailing dot.
	Names []string `json:"names,omitempty"`
	// Confirmed reports whether ConfirmedName's A or AAAA records include
	// the address.
	Confirmed     bool   `json:"confirmed"`
	ConfirmedName string `json:"confirmed_name,omitempty"`
	// Temporary reports that a lookup failed, so an unconfirmed result is
	// not conclusive.
	Temporary bool   `json:"temporary,omitempty"`
	Error     string `json:"error,omitempty"`
}

// reverseDNS looks up the PTR names of addr and each name's addresses.
func reverseDNS(ctx context.Context, r dnscheck.Resolver, addr netip.Addr) ReverseDNS {
	var res ReverseDNS
	rev, err := dns.ReverseAddr(addr.String())
	if err != nil {
		res.Error = cleanText(err.Error())
		return res
	}
	a, err := r.Query(ctx, rev, dns.TypePTR)
	if err != nil {
		if !dnscheck.IsNotFound(err) {
			res.Temporary = true
			res.Error = cleanText(err.Error())
		}
		return res
	}
	for _, rr := range a.Records {
		if p, ok := rr.(*dns.PTR); ok && len(res.Names) < maxPTRNames {
			res.Names = append(res.Names, strings.ToLower(strings.TrimSuffix(p.Ptr, ".")))
		}
	}
	for _, name := range res.Names {
		addrs, err := r.LookupNetIP(ctx, "ip", name)
		if err != nil {
			if !dnscheck.IsNotFound(err) {
				res.Temporary = true
				res.Error = cleanText(err.Error())
			}
			continue
		}
		if slices.Contains(addrs, addr.Unmap()) {
			res.Confirmed = true
			res.ConfirmedName = name
			res.Temporary = false
			res.Error = ""
			return res
		}
	}
	return res
}
