// Package netguard protects outgoing requests to user-supplied URLs (webhook
// subscriptions) against server-side request forgery.
//
// A destination is refused when its IP address is not globally reachable:
// private (RFC 1918, RFC 4193), loopback, link-local, shared address space
// (RFC 6598, CGNAT), multicast, unspecified, broadcast, the documentation and
// benchmarking ranges, and everything else the IANA special-purpose address
// registries (RFC 6890) mark as reserved, plus cloud metadata endpoints.
// IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry, and
// NAT64 (RFC 6052) and 6to4 (RFC 3056) addresses as their embedded IPv4
// address.
//
// An operator allow-list (WEBHOOK_ALLOWED_CIDRS) admits refused addresses,
// e.g. an internal network the operator trusts, or loopback in tests. Cloud
// metadata addresses are admitted only by an entry that names exactly that
// address (a /32 or /128): a broad entry such as 169.254.0.0/16 or 0.0.0.0/0
// never opens the metadata service by accident.
//
// Two checks are provided. Guard.CheckURL validates a URL when a subscription
// is created or updated, to give the user a clear error early. Guard.Control,
// installed on the net.Dialer of the delivery client, re-checks the address
// actually dialled after DNS resolution; it is the authoritative check, and it
// defeats DNS rebinding (a name that resolved to a public address at
// validation time and to a private one at delivery time).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// EnvAllowedCIDRs is the environment variable holding the operator
// allow-list: comma-separated CIDR prefixes or single addresses.
const EnvAllowedCIDRs = "WEBHOOK_ALLOWED_CIDRS"

// Reason says why an address is refused. Its value reads well after "a" or
// "an" in a sentence.
type Reason string

// Reasons an address is refused.
const (
	ReasonInvalid       Reason = "invalid address"
	ReasonUnspecified   Reason = "unspecified address"
	ReasonLoopback      Reason = "loopback address"
	ReasonPrivate       Reason = "private network address"
	ReasonLinkLocal     Reason = "link-local address"
	ReasonSharedCGNAT   Reason = "shared address space (carrier-grade NAT) address"
	ReasonMulticast     Reason = "multicast address"
	ReasonBroadcast     Reason = "broadcast address"
	ReasonDocumentation Reason = "documentation address"
	ReasonBenchmark     Reason = "benchmarking address"
	ReasonReserved      Reason = "reserved address"
	ReasonMetadata      Reason = "cloud metadata service address"
)

// ErrBlocked is matched (errors.Is) by every BlockedError.
var ErrBlocked = errors.New("destination address not allowed")

// BlockedError reports a refused destination address.
type BlockedError struct {
	// IP is the refused address as seen (a mapped IPv6 address stays mapped).
	IP netip.Addr
	// Reason is the class of address that was refused.
	Reason Reason
}

// Error implements error.
func (e *BlockedError) Error() string {
	return fmt.Sprintf("destination %s is not allowed: %s", e.IP, e.Reason)
}

// Unwrap returns ErrBlocked.
func (e *BlockedError) Unwrap() error { return ErrBlocked }

type rangeEntry struct {
	prefix netip.Prefix
	reason Reason
}

// v4Ranges is an immutable table of refused IPv4 ranges, most specific first
// so the reason is the precise one (metadata before link-local, broadcast
// before reserved). Sources: IANA IPv4 Special-Purpose Address Registry.
var v4Ranges = []rangeEntry{
	{netip.MustParsePrefix("169.254.169.254/32"), ReasonMetadata}, // AWS, GCP, Azure, OpenStack, ...
	{netip.MustParsePrefix("169.254.170.2/32"), ReasonMetadata},   // AWS ECS task metadata
	{netip.MustParsePrefix("100.100.100.200/32"), ReasonMetadata}, // Alibaba Cloud
	{netip.MustParsePrefix("192.0.0.192/32"), ReasonMetadata},     // Oracle Cloud
	{netip.MustParsePrefix("255.255.255.255/32"), ReasonBroadcast},
	{netip.MustParsePrefix("0.0.0.0/32"), ReasonUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), ReasonReserved}, // "this network", RFC 791
	{netip.MustParsePrefix("10.0.0.0/8"), ReasonPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ReasonSharedCGNAT}, // RFC 6598
	{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal}, // RFC 3927
	{netip.MustParsePrefix("172.16.0.0/12"), ReasonPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), ReasonReserved},      // IETF protocol assignments, RFC 6890
	{netip.MustParsePrefix("192.0.2.0/24"), ReasonDocumentation}, // TEST-NET-1, RFC 5737
	{netip.MustParsePrefix("192.88.99.0/24"), ReasonReserved},    // 6to4 relay anycast, deprecated by RFC 7526
	{netip.MustParsePrefix("192.168.0.0/16"), ReasonPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), ReasonBenchmark},       // RFC 2544
	{netip.MustParsePrefix("198.51.100.0/24"), ReasonDocumentation}, // TEST-NET-2
	{netip.MustParsePrefix("203.0.113.0/24"), ReasonDocumentation},  // TEST-NET-3
	{netip.MustParsePrefix("224.0.0.0/4"), ReasonMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), ReasonReserved}, // RFC 1112 "future use"
}

// v6Ranges is an immutable table of refused IPv6 ranges, most specific first.
// IPv4-mapped, NAT64 and 6to4 addresses are handled before this table, and
// anything outside 2000::/3 (global unicast) is refused as reserved after it.
// Sources: IANA IPv6 Special-Purpose Address Registry.
var v6Ranges = []rangeEntry{
	{netip.MustParsePrefix("fd00:ec2::254/128"), ReasonMetadata}, // AWS IMDS over IPv6
	{netip.MustParsePrefix("::/128"), ReasonUnspecified},
	{netip.MustParsePrefix("::1/128"), ReasonLoopback},
	{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), ReasonPrivate}, // site-local, deprecated by RFC 3879
	{netip.MustParsePrefix("fc00::/7"), ReasonPrivate},  // unique local, RFC 4193
	{netip.MustParsePrefix("ff00::/8"), ReasonMulticast},
	{netip.MustParsePrefix("2001:db8::/32"), ReasonDocumentation}, // RFC 3849
	{netip.MustParsePrefix("3fff::/20"), ReasonDocumentation},     // RFC 9637
	{netip.MustParsePrefix("2001::/23"), ReasonReserved},          // IETF protocol assignments incl. Teredo, RFC 2928
	{netip.MustParsePrefix("64:ff9b:1::/48"), ReasonReserved},     // local-use NAT64, RFC 8215
	{netip.MustParsePrefix("100::/64"), ReasonReserved},           // discard-only, RFC 6666
}

var (
	nat64Prefix    = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
	sixToFourRange = netip.MustParsePrefix("2002::/16")    // RFC 3056
	globalUnicast  = netip.MustParsePrefix("2000::/3")
)

// Classify returns why ip would be refused without an allow-list, or "" when
// it is a globally reachable unicast address. A zone is ignored.
func Classify(ip netip.Addr) Reason {
	if !ip.IsValid() {
		return ReasonInvalid
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return classify4(ip.Unmap())
	}
	if ip.Is4() {
		return classify4(ip)
	}
	if v4, ok := embeddedV4(ip); ok {
		return classify4(v4)
	}
	for _, r := range v6Ranges {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	if !globalUnicast.Contains(ip) {
		return ReasonReserved
	}
	return ""
}

func classify4(ip netip.Addr) Reason {
	for _, r := range v4Ranges {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	return ""
}

// embeddedV4 returns the IPv4 address carried by a NAT64 (64:ff9b::/96) or
// 6to4 (2002::/16) address: such a destination reaches that IPv4 address, so
// it is judged as that address.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case nat64Prefix.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFourRange.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// ParseCIDRs parses an allow-list: comma-separated CIDR prefixes
// ("10.20.0.0/16", "fd12::/48") or single addresses ("127.0.0.1", taken as
// /32 or /128). Blank entries are skipped. A prefix with host bits set
// ("10.0.0.1/8") is an error rather than silently widened or narrowed, and
// IPv4-mapped IPv6 prefixes are converted to IPv4 ones.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := parseCIDR(entry)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, nil
}

func parseCIDR(entry string) (netip.Prefix, error) {
	if strings.Contains(entry, "%") {
		return netip.Prefix{}, fmt.Errorf("%s entry %q: zones are not supported", EnvAllowedCIDRs, entry)
	}
	var p netip.Prefix
	if strings.Contains(entry, "/") {
		var err error
		p, err = netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s entry %q is not a CIDR prefix like 10.0.0.0/8 or fd00::/8: %w", EnvAllowedCIDRs, entry, err)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("%s entry %q has host bits set; did you mean %s?", EnvAllowedCIDRs, entry, p.Masked())
		}
	} else {
		addr, err := netip.ParseAddr(entry)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s entry %q is neither a CIDR prefix nor an IP address: %w", EnvAllowedCIDRs, entry, err)
		}
		p = netip.PrefixFrom(addr, addr.BitLen())
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, nil
}

// Guard decides which destination addresses outgoing requests may reach. It
// is immutable and safe for concurrent use. A nil *Guard refuses like a Guard
// with an empty allow-list.
type Guard struct {
	allowed []netip.Prefix
}

// NewGuard returns a Guard that refuses non-public addresses unless one of
// allowed contains them (see the package documentation for metadata
// addresses).
func NewGuard(allowed []netip.Prefix) *Guard {
	g := &Guard{allowed: make([]netip.Prefix, 0, len(allowed))}
	for _, p := range allowed {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		g.allowed = append(g.allowed, p.Masked())
	}
	return g
}

// ParseGuard returns a Guard whose allow-list is parsed from the value of
// WEBHOOK_ALLOWED_CIDRS (see ParseCIDRs); an empty value allows nothing extra.
func ParseGuard(allowedCIDRs string) (*Guard, error) {
	prefixes, err := ParseCIDRs(allowedCIDRs)
	if err != nil {
		return nil, err
	}
	return NewGuard(prefixes), nil
}

// Allowed returns a copy of the allow-list.
func (g *Guard) Allowed() []netip.Prefix {
	if g == nil {
		return nil
	}
	return append([]netip.Prefix(nil), g.allowed...)
}

// CheckIP returns nil when ip may be dialled and a *BlockedError otherwise.
func (g *Guard) CheckIP(ip netip.Addr) error {
	reason := Classify(ip)
	if reason == "" || g.admits(ip, reason) {
		return nil
	}
	return &BlockedError{IP: ip, Reason: reason}
}

func (g *Guard) admits(ip netip.Addr, reason Reason) bool {
	if g == nil || reason == ReasonInvalid {
		return false
	}
	candidates := []netip.Addr{ip.WithZone("").Unmap()}
	if v4, ok := embeddedV4(candidates[0]); ok {
		candidates = append(candidates, v4)
	}
	for _, p := range g.allowed {
		for _, c := range candidates {
			if !p.Contains(c) {
				continue
			}
			if reason == ReasonMetadata && !p.IsSingleIP() {
				continue // metadata must be named exactly
			}
			return true
		}
	}
	return false
}

// Control is a net.Dialer Control function: it refuses to connect to an
// address the Guard does not allow. It runs after name resolution, on the
// address actually dialled, for every address tried (including each Happy
// Eyeballs attempt), so it is the authoritative check. An address it cannot
// parse is refused.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedError{Reason: ReasonInvalid}
	}
	return g.CheckIP(ap.Addr())
}

// Dialer returns base (or a zero net.Dialer when base is nil) with Control
// set to g.Control. Any Control already set on base is replaced.
func (g *Guard) Dialer(base *net.Dialer) *net.Dialer {
	d := &net.Dialer{}
	if base != nil {
		*d = *base
	}
	d.ControlContext = nil
	d.Control = g.Control
	return d
}

// Resolver resolves host names to IP addresses. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// URLError reports a webhook URL refused by CheckURL.
type URLError struct {
	// URL is the URL as given.
	URL string
	// Message is safe to show to the user (a 422 detail or field message):
	// it completes the sentence "url ..." e.g. "must use http or https".
	// It says what the customer can do, never the server's settings.
	Message string
	// OperatorHint, for a refused address, is what an operator could set
	// to admit it (for the log, not for the customer); empty otherwise.
	OperatorHint string
	// Err is the underlying cause, if any (a *BlockedError or a
	// *url.Error); for logs.
	Err error
}

// Error implements error.
func (e *URLError) Error() string {
	if e.Err != nil {
		return "invalid webhook URL: " + e.Message + ": " + e.Err.Error()
	}
	return "invalid webhook URL: " + e.Message
}

// Unwrap returns the cause.
func (e *URLError) Unwrap() error { return e.Err }

// maxURLLength bounds a webhook URL; real endpoints are far shorter.
const maxURLLength = 2048

// CheckURL validates a webhook destination URL at create or update time:
// absolute, http or https, a host, no user information, and a host whose
// every address (the IP literal, or all addresses the resolver returns) is
// allowed. It returns a *URLError. A host name that does not resolve is
// accepted (see below). resolver may be nil for net.DefaultResolver. The
// caller bounds the time spent resolving through ctx.
//
// This check is advisory: DNS may change before delivery. Control, on the
// delivery client's dialer, is authoritative.
func (g *Guard) CheckURL(ctx context.Context, raw string, resolver Resolver) error {
	fail := func(msg string, err error) error {
		return &URLError{URL: raw, Message: msg, Err: err}
	}
	if raw == "" {
		return fail("must not be empty", nil)
	}
	if len(raw) > maxURLLength {
		return fail(fmt.Sprintf("must be at most %d characters", maxURLLength), nil)
	}
	if strings.TrimSpace(raw) != raw {
		return fail("must not start or end with spaces", nil)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("is not a valid URL", err)
	}
	if u.Scheme == "" || u.Opaque != "" || (u.Host == "" && u.User == nil) {
		return fail("must be an absolute URL such as https://example.com/webhooks", nil)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fail(fmt.Sprintf("must use http or https, not %q", u.Scheme), nil)
	}
	if u.User != nil {
		return fail("must not contain a user name or password; put credentials in the path or query, or rely on the signature", nil)
	}
	host := u.Hostname()
	if host == "" {
		return fail("must have a host", nil)
	}
	if port := u.Port(); port != "" {
		if n, err := parsePort(port); err != nil || n == 0 {
			return fail(fmt.Sprintf("has an invalid port %q", port), nil)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fail("has an empty port", nil)
	}

	if strings.HasPrefix(u.Host, "[") || strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fail(fmt.Sprintf("has an invalid IPv6 address %q", host), err)
		}
		if ip.Zone() != "" {
			return fail("must not use an IPv6 zone", nil)
		}
		return g.checkURLAddrs(raw, host, []netip.Addr{ip})
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.checkURLAddrs(raw, host, []netip.Addr{ip})
	}
	if msg := checkHostname(host); msg != "" {
		return fail(msg, nil)
	}

	if resolver == nil {
		resolver = net.DefaultResolver
	}
	// A name that does not resolve (yet, or not from here) is accepted:
	// this check can only judge addresses it sees, and the dial-time check
	// (Control) judges every address actually dialled. Deliveries to such
	// a URL fail with a DNS error until the name resolves.
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil
	}
	return g.checkURLAddrs(raw, host, addrs)
}

func (g *Guard) checkURLAddrs(raw, host string, addrs []netip.Addr) error {
	for _, ip := range addrs {
		if err := g.CheckIP(ip); err != nil {
			var be *BlockedError
			errors.As(err, &be)
			msg := fmt.Sprintf("points to %s, a %s; %s", ip, be.Reason, customerHint)
			if ip.String() != host {
				msg = fmt.Sprintf("host %q resolves to %s, a %s; %s", host, ip, be.Reason, customerHint)
			}
			return &URLError{URL: raw, Message: msg, Err: err, OperatorHint: OperatorHint(ip, be.Reason)}
		}
	}
	return nil
}

// customerHint completes a refusal for the customer: what to do instead.
const customerHint = "webhooks go only to addresses reachable from the internet: use a public host name " +
	"for your endpoint (or a tunnel to it)"

// OperatorHint is the setting that would admit a refused ip, for the
// operator's log: the customer cannot change it.
func OperatorHint(ip netip.Addr, r Reason) string {
	single := netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
	hint := "the server's " + EnvAllowedCIDRs + " setting admits such an address (for example " +
		EnvAllowedCIDRs + "=" + single.String() + ")"
	if r == ReasonMetadata {
		hint += "; a metadata address only when listed as a single address"
	}
	return hint
}

func parsePort(s string) (int, error) {
	if len(s) > 5 {
		return 0, errors.New("port too long")
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("port not numeric")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("port out of range")
	}
	return n, nil
}

// checkHostname returns a user-facing message when host is not a plausible
// DNS name. A name whose last label is numeric ("2130706433", "0x7f.1",
// "127.1") is refused: it is no DNS name, and some resolvers would read it as
// an IPv4 address in a legacy notation.
func checkHostname(host string) string {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return fmt.Sprintf("has an invalid host name %q", host)
	}
	labels := strings.Split(name, ".")
	for _, label := range labels {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("has an invalid host name %q", host)
		}
		for _, c := range label {
			// Letters, digits, hyphen, and underscore (seen in real
			// names). url.Parse keeps Unicode host names as they are;
			// internationalised names must be given in their xn-- form.
			if c > 0x7f {
				return fmt.Sprintf("has a non-ASCII host name %q; use its punycode (xn--) form", host)
			}
			if !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return fmt.Sprintf("has an invalid host name %q", host)
			}
		}
	}
	if looksNumeric(labels[len(labels)-1]) {
		return fmt.Sprintf("has a host %q that is neither a valid IP address nor a DNS name", host)
	}
	return ""
}

func looksNumeric(label string) bool {
	l := strings.ToLower(label)
	digits := "0123456789"
	if strings.HasPrefix(l, "0x") {
		l, digits = l[2:], "0123456789abcdef"
	}
	for _, c := range l {
		if !strings.ContainsRune(digits, c) {
			return false
		}
	}
	return true
}
