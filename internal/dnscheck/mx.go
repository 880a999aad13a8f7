package dnscheck

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// MXHost is one MX target and what its name resolves to.
type MXHost struct {
	Host       string   `json:"host"`
	Preference uint16   `json:"preference"`
	Addresses  []string `json:"addresses"`
	// CNAME is set when the target is an alias, which RFC 2181 section 10.3
	// forbids.
	CNAME string `json:"cname,omitempty"`
	Error string `json:"error,omitempty"`

	temporary bool
}

// MXResult is the MX check's result with each host.
type MXResult struct {
	Result
	// NullMX is true for a null MX (RFC 7505): the domain accepts no mail.
	NullMX bool     `json:"null_mx"`
	Hosts  []MXHost `json:"hosts"`
}

// CheckMX checks the domain's MX records (RFC 5321 section 5.1): present,
// each target a host name (not an IP address, not an alias) with A or AAAA
// records. Status: pass, warn (some targets broken), fail (no target
// usable), none (no MX), neutral (null MX), permerror (null MX mixed with
// other MX), temperror.
func CheckMX(ctx context.Context, r Resolver, domain string) *MXResult {
	res := &MXResult{Hosts: []MXHost{}}
	defer res.finish()
	mxs, err := r.LookupMX(ctx, domain)
	switch {
	case IsNotFound(err):
		res.Status = StatusNone
		res.errorf("no MX records at %s; mail is delivered to its address records, if any (RFC 5321 section 5.1)", domain)
		res.instructf("Publish MX records for %s pointing at your mail provider, or a null MX \"0 .\" (RFC 7505) if it never receives mail.", domain)
		return res
	case err != nil:
		res.Status = StatusTemperror
		res.errorf("looking up the MX records of %s failed: %v", domain, err)
		return res
	}
	for _, mx := range mxs {
		res.Records = append(res.Records, fmt.Sprintf("%d %s", mx.Pref, mx.Host))
	}
	for _, mx := range mxs {
		if mx.Host == "." {
			res.NullMX = true
		}
	}
	if res.NullMX {
		if len(mxs) > 1 {
			res.Status = StatusPermerror
			res.errorf("a null MX must be the only MX record (RFC 7505 section 3)")
			res.instructf("Remove the \"0 .\" MX record, or remove the other MX records if %s receives no mail.", domain)
			return res
		}
		res.Status = StatusNeutral
		res.warnf("null MX: %s declares that it accepts no email (RFC 7505), so bounces and replies to it fail", domain)
		return res
	}

	hosts := make([]MXHost, len(mxs))
	var wg sync.WaitGroup
	for i, mx := range mxs {
		wg.Go(func() { hosts[i] = resolveMXHost(ctx, r, mx.Host, mx.Pref) })
	}
	wg.Wait()
	res.Hosts = hosts

	usable, temp := 0, 0
	for _, h := range hosts {
		switch {
		case h.temporary:
			temp++
			res.errorf("%s: %s", h.Host, h.Error)
		case h.Error != "":
			res.errorf("%s: %s", h.Host, h.Error)
		case h.CNAME != "":
			usable++
			res.warnf("MX target %s is an alias (CNAME to %s); RFC 2181 section 10.3 requires the host's own name", h.Host, h.CNAME)
			res.instructf("Point the MX record at %s directly instead of %s.", h.CNAME, h.Host)
		default:
			usable++
		}
	}
	switch {
	case usable == len(hosts):
		res.Status = StatusPass
	case usable > 0:
		// Some targets work: mail still arrives, but the broken ones are
		// errors worth a warning status, not a failure.
		res.Status = StatusPass
		res.Warnings = append(res.Warnings, res.Errors...)
		res.Errors = nil
	case temp > 0:
		res.Status = StatusTemperror
	default:
		res.Status = StatusFail
		res.instructf("Make every MX target of %s a host name with A or AAAA records.", domain)
	}
	return res
}

func resolveMXHost(ctx context.Context, r Resolver, host string, pref uint16) MXHost {
	h := MXHost{Host: host, Preference: pref, Addresses: []string{}}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		h.Error = "the MX target is an IP address; it must be a host name (RFC 5321 section 5.1)"
		return h
	}
	var temporary error
	found := false
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		a, err := r.Query(ctx, host, qtype)
		switch {
		case IsNotFound(err):
			continue
		case err != nil:
			temporary = err
			continue
		}
		found = true
		if len(a.CNAMEs) > 0 {
			h.CNAME = a.CNAMEs[len(a.CNAMEs)-1]
		}
		for _, rr := range a.Records {
			switch rr := rr.(type) {
			case *dns.A:
				h.Addresses = append(h.Addresses, rr.A.String())
			case *dns.AAAA:
				h.Addresses = append(h.Addresses, rr.AAAA.String())
			}
		}
	}
	switch {
	case found:
	case temporary != nil:
		h.Error = fmt.Sprintf("temporary failure resolving the host: %v", temporary)
		h.temporary = true
	default:
		h.Error = "the MX target has no A or AAAA records"
	}
	return h
}
