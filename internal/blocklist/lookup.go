package blocklist

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// MaxReasonLength bounds the TXT reason kept from a listing, in bytes.
const MaxReasonLength = 512

// maxAnswers bounds the A records read from one answer.
const maxAnswers = 16

// Resolver is the part of dnscheck.Resolver a lookup needs; *dnscheck.Client
// and every dnscheck.Resolver satisfy it. Its errors are classified with
// dnscheck.IsNotFound (NXDOMAIN or NODATA) and otherwise temporary.
type Resolver interface {
	Query(ctx context.Context, name string, qtype uint16) (*dnscheck.Answer, error)
}

// Status is the outcome of one lookup.
type Status string

const (
	// NotListed: the list answered NXDOMAIN or NODATA.
	NotListed Status = "not_listed"
	// Listed: the list answered with listing codes only.
	Listed Status = "listed"
	// ListError: the list answered, but with an error code (it refuses the
	// resolver, the query volume, or the kind of query) or with an address
	// outside 127.0.0.0/8; the answer says nothing about the target.
	ListError Status = "list_error"
	// Temporary: no answer (timeout, SERVFAIL, REFUSED, network error). The
	// caller keeps the previous state.
	Temporary Status = "temporary"
)

// Result is the outcome of a lookup of one target on one list.
type Result struct {
	// Status is the outcome; only Listed is a listing.
	Status Status
	// Name is the DNS name queried.
	Name string
	// Answers are the A records returned (Listed and ListError), sorted.
	Answers []netip.Addr
	// Codes are the meanings of the answers when Listed, in Answers order;
	// an answer the catalog does not document has an empty Name and a
	// Meaning that says so.
	Codes []Code
	// Reason is the list's TXT record for the name when Listed, printable
	// and at most MaxReasonLength bytes; empty when the list publishes none
	// or the TXT lookup failed (which does not undo the listing).
	Reason string
	// TTL is the smallest TTL of the A records (Listed and ListError), for
	// caching; zero when the answer had no records (NXDOMAIN carries its
	// negative TTL in a record the resolver does not return).
	TTL time.Duration
	// Err explains ListError and Temporary; nil otherwise.
	Err error
}

// Informational reports whether a listing is informational only: the list
// is, or every code returned is (e.g. only Spamhaus PBL).
func (r Result) Informational(l List) bool {
	if r.Status != Listed {
		return false
	}
	if l.Informational {
		return true
	}
	for _, c := range r.Codes {
		if !c.Informational {
			return false
		}
	}
	return len(r.Codes) > 0
}

// Lookup looks target up on l: an IP address (IPv4 or IPv6, in text) on an
// IP list, a domain name on a domain list. It is LookupIP or LookupDomain
// for callers that store targets as text. The error is for a caller mistake
// only; every DNS outcome is in Result.
func Lookup(ctx context.Context, r Resolver, l List, target string) (Result, error) {
	if l.Kind == KindIP {
		addr, err := netip.ParseAddr(target)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %s is an IP list and %q is not an IP address", ErrInvalid, l.Zone, target)
		}
		return LookupIP(ctx, r, l, addr)
	}
	return LookupDomain(ctx, r, l, target)
}

// LookupIP looks addr up on an IP list. The error is for a caller mistake
// only (a domain list, an invalid address); every DNS outcome is in Result.
func LookupIP(ctx context.Context, r Resolver, l List, addr netip.Addr) (Result, error) {
	if l.Kind != KindIP {
		return Result{}, fmt.Errorf("%w: %s is a domain list, it cannot look up an IP address", ErrInvalid, l.Zone)
	}
	name, err := IPQueryName(addr, l.Zone)
	if err != nil {
		return Result{}, err
	}
	return lookupName(ctx, r, l, name), nil
}

// LookupDomain looks domain up on a domain list. The error is for a caller
// mistake only (an IP list, an invalid domain); every DNS outcome is in
// Result.
func LookupDomain(ctx context.Context, r Resolver, l List, domain string) (Result, error) {
	if l.Kind != KindDomain {
		return Result{}, fmt.Errorf("%w: %s is an IP list, it cannot look up a domain", ErrInvalid, l.Zone)
	}
	name, err := DomainQueryName(domain, l.Zone)
	if err != nil {
		return Result{}, err
	}
	return lookupName(ctx, r, l, name), nil
}

// lookupName queries the A records of name and reads them with l's codes.
func lookupName(ctx context.Context, r Resolver, l List, name string) Result {
	res := Result{Name: name}
	a, err := r.Query(ctx, name, dns.TypeA)
	switch {
	case dnscheck.IsNotFound(err):
		res.Status = NotListed
		return res
	case err != nil:
		res.Status = Temporary
		res.Err = fmt.Errorf("looking up %s: %w", name, err)
		return res
	}

	var errs []string
	for i, rr := range a.Records {
		if i == maxAnswers {
			break
		}
		rec, ok := rr.(*dns.A)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(rec.A)
		if !ok {
			continue
		}
		ttl := time.Duration(rec.Hdr.Ttl) * time.Second
		if len(res.Answers) == 0 || ttl < res.TTL {
			res.TTL = ttl
		}
		ip = ip.Unmap()
		res.Answers = append(res.Answers, ip)
		switch {
		case !loopback.Contains(ip):
			errs = append(errs, fmt.Sprintf("%s is outside 127.0.0.0/8 (is the resolver rewriting NXDOMAIN answers, or the zone gone?)", ip))
		case l.isError(ip):
			errs = append(errs, fmt.Sprintf("%s is the list's error code (it refuses queries from this resolver or at this volume; see its usage policy)", ip))
		default:
			if c, ok := l.code(ip); ok {
				res.Codes = append(res.Codes, c)
			} else if l.Listed.Contains(ip) {
				res.Codes = append(res.Codes, Code{Addr: ip, Meaning: "Listed, with a code the catalog does not document."})
			} else {
				errs = append(errs, fmt.Sprintf("%s is not a code this list uses for listings", ip))
			}
		}
	}
	if len(res.Answers) == 0 {
		res.Status = ListError
		res.Err = fmt.Errorf("%s answered without a usable A record", name)
		return res
	}
	if len(errs) > 0 {
		// One error code spoils the whole answer: never report a listing
		// the list itself says it could not make.
		res.Status = ListError
		res.Codes = nil
		res.Err = fmt.Errorf("%s on %s: %s", name, l.Zone, strings.Join(errs, "; "))
		return res
	}
	res.Status = Listed
	res.Reason = reason(ctx, r, name)
	return res
}

// reason returns the TXT records of a listed name, joined, made printable
// and bounded. A failed TXT lookup gives an empty reason.
func reason(ctx context.Context, r Resolver, name string) string {
	a, err := r.Query(ctx, name, dns.TypeTXT)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, rr := range a.Records {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		for _, s := range txt.Txt {
			b.WriteString(s)
			if b.Len() > MaxReasonLength {
				break
			}
		}
		if b.Len() > MaxReasonLength {
			break
		}
	}
	return sanitize(b.String())
}

// sanitize keeps printable text, replacing control characters and invalid
// UTF-8 with spaces, and cuts it to MaxReasonLength bytes on a rune boundary.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > MaxReasonLength {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// HealthStatus is the outcome of a health check.
type HealthStatus string

const (
	// Healthy: the list lists its test entry and not its negative one.
	Healthy HealthStatus = "healthy"
	// Unhealthy: the list answers wrongly; callers skip its lookups and
	// report Reason.
	Unhealthy HealthStatus = "unhealthy"
	// HealthUnknown: a test query had no answer (timeout, SERVFAIL); callers
	// keep the list's previous health.
	HealthUnknown HealthStatus = "unknown"
)

// HealthResult is the outcome of Health.
type HealthResult struct {
	Status HealthStatus
	// Reason says why the list is unhealthy or its health unknown.
	Reason string
	// Positive and Negative are the lookups of the entry that must be
	// listed and of the one that must not be.
	Positive, Negative Result
}

// Health checks a list as RFC 5782 section 5 describes: an IP list must list
// 127.0.0.2 and must not list 127.0.0.1; a domain list must list its test
// name ("test", or the catalog's TestName) and must not list "invalid". A
// list that lists its negative entry (it lists everything, or the resolver
// rewrites NXDOMAIN), does not list its positive entry (it is gone or does
// not answer us), or answers with error codes (it refuses our resolver) is
// Unhealthy.
func Health(ctx context.Context, r Resolver, l List) HealthResult {
	var posName, negName string
	var err error
	switch l.Kind {
	case KindIP:
		posName, err = IPQueryName(netip.MustParseAddr("127.0.0.2"), l.Zone)
		if err == nil {
			negName, err = IPQueryName(netip.MustParseAddr("127.0.0.1"), l.Zone)
		}
	case KindDomain:
		test := l.TestName
		if test == "" {
			test = "test"
		}
		posName, err = DomainQueryName(test, l.Zone)
		if err == nil {
			negName, err = DomainQueryName("invalid", l.Zone)
		}
	default:
		err = fmt.Errorf("%w: list %q has no kind", ErrInvalid, l.Zone)
	}
	if err != nil {
		return HealthResult{Status: Unhealthy, Reason: err.Error()}
	}
	h := HealthResult{Positive: lookupName(ctx, r, l, posName), Negative: lookupName(ctx, r, l, negName)}
	pos, neg := h.Positive, h.Negative
	switch {
	case neg.Status == Listed:
		h.Status = Unhealthy
		h.Reason = fmt.Sprintf("%s lists %s, which must never be listed (RFC 5782 section 5): the list answers for everything, or the resolver rewrites its answers", l.Zone, negName)
	case pos.Status == ListError:
		h.Status = Unhealthy
		h.Reason = fmt.Sprintf("%s answers its test entry with an error: %v", l.Zone, pos.Err)
	case neg.Status == ListError:
		h.Status = Unhealthy
		h.Reason = fmt.Sprintf("%s answers its negative test entry with an error: %v", l.Zone, neg.Err)
	case pos.Status == NotListed:
		h.Status = Unhealthy
		h.Reason = fmt.Sprintf("%s does not list its test entry %s (RFC 5782 section 5): the list may be shut down or not answering this resolver", l.Zone, posName)
	case pos.Status == Temporary || neg.Status == Temporary:
		h.Status = HealthUnknown
		h.Reason = fmt.Sprintf("%s did not answer its health check: %v", l.Zone, errors.Join(pos.Err, neg.Err))
	default:
		h.Status = Healthy
	}
	return h
}
