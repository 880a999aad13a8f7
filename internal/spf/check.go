package spf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// PTRResolver is implemented by resolvers that can look up the names of an
// address. Check uses it for the ptr mechanism and the %{p} macro; with a
// resolver that lacks it, ptr never matches and %{p} is "unknown".
type PTRResolver interface {
	LookupAddr(ctx context.Context, addr netip.Addr) ([]string, error)
}

// Client is what check_host (RFC 7208 section 4.1) judges: the connecting
// client's address, the HELO/EHLO name and the MAIL FROM address.
type Client struct {
	IP netip.Addr
	// Helo is the HELO or EHLO name.
	Helo string
	// Sender is the MAIL FROM address (the <sender> of section 4.1). When it
	// is empty (a bounce) or has no "@", section 2.4 makes it
	// "postmaster@" plus the HELO name.
	Sender string
}

// Result is the outcome of check_host for one identity.
type Result struct {
	// Identity is "mailfrom" or "helo".
	Identity string `json:"identity"`
	// Domain is the domain whose record was checked.
	Domain string `json:"domain"`
	// Status is one of the results of section 2.6.
	Status Status `json:"status"`
	// Mechanism is the term that matched, e.g. "ip4:192.0.2.0/24" or
	// "-all", or empty when none did (neutral by default) or on error.
	Mechanism string `json:"mechanism,omitempty"`
	// Lookups is the number of terms that caused DNS lookups.
	Lookups int `json:"lookups"`
	// Reason explains a none, temperror or permerror result.
	Reason string `json:"reason,omitempty"`
}

// Identities of a Result.
const (
	IdentityMailFrom = "mailfrom"
	IdentityHelo     = "helo"
)

// CheckMailFrom runs check_host for the MAIL FROM identity (RFC 7208
// section 2.4): the domain of the sender, or of postmaster@HELO for the
// null sender.
func CheckMailFrom(ctx context.Context, r Resolver, c Client) Result {
	local, domain := splitSender(c.Sender, c.Helo)
	c.Sender = local + "@" + domain
	res := Check(ctx, r, c, domain)
	res.Identity = IdentityMailFrom
	return res
}

// CheckHelo runs check_host for the HELO identity (RFC 7208 section 2.3),
// with postmaster@HELO as the sender.
func CheckHelo(ctx context.Context, r Resolver, c Client) Result {
	c.Sender = "postmaster@" + c.Helo
	res := Check(ctx, r, c, c.Helo)
	res.Identity = IdentityHelo
	return res
}

// splitSender returns the local part and domain of a MAIL FROM address,
// applying the postmaster@HELO rule of section 4.3 for an empty one.
func splitSender(sender, helo string) (local, domain string) {
	sender = strings.Trim(sender, "<>")
	at := strings.LastIndexByte(sender, '@')
	if at < 0 {
		return "postmaster", helo
	}
	local, domain = sender[:at], sender[at+1:]
	if local == "" {
		local = "postmaster"
	}
	return local, domain
}

// Check runs check_host(ip, domain, sender) of RFC 7208 section 4 and
// returns its result. It enforces the limits of section 4.6.4: at most 10
// terms that cause DNS lookups, at most 2 void lookups and at most 10 MX
// hosts or PTR names per mechanism. Cancelling ctx makes pending lookups
// fail as temperror.
func Check(ctx context.Context, r Resolver, c Client, domain string) Result {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	c.IP = c.IP.Unmap()
	ch := &checker{r: r, c: c}
	status, mech, reason := ch.checkHost(ctx, domain)
	return Result{Domain: domain, Status: status, Mechanism: mech, Lookups: ch.lookups, Reason: reason}
}

type checker struct {
	r       Resolver
	c       Client
	lookups int
	voids   int
}

// checkError carries a permerror or temperror out of a mechanism.
type checkError struct {
	status Status
	reason string
}

func (e *checkError) Error() string { return e.reason }

func permerror(format string, args ...any) *checkError {
	return &checkError{status: Permerror, reason: fmt.Sprintf(format, args...)}
}

func temperror(format string, args ...any) *checkError {
	return &checkError{status: Temperror, reason: fmt.Sprintf(format, args...)}
}

// checkHost evaluates domain's record against the client and returns the
// result, the matching term and a reason for none, temperror and permerror.
func (ch *checker) checkHost(ctx context.Context, domain string) (Status, string, string) {
	if !validDomain(domain) {
		// Section 4.3: a malformed domain or one that is not an FQDN gives none.
		return None, "", fmt.Sprintf("%q is not a valid domain name", domain)
	}
	txt, _, status, err := lookupSPF(ctx, ch.r, domain)
	switch status {
	case None:
		return None, "", fmt.Sprintf("%s publishes no SPF record", domain)
	case Temperror, Permerror:
		return status, "", err.Error()
	}
	rec, err := ParseRecord(txt)
	if err != nil {
		return Permerror, "", fmt.Sprintf("SPF record of %s: %v", domain, err)
	}
	for _, d := range rec.Directives {
		matched, err := ch.match(ctx, d, domain)
		var ce *checkError
		if errors.As(err, &ce) {
			return ce.status, "", ce.reason
		}
		if matched {
			return d.Result(), d.Raw, ""
		}
	}
	if rec.Redirect == "" {
		return Neutral, "", ""
	}
	return ch.redirect(ctx, rec.Redirect, domain)
}

// redirect follows redirect= (section 6.1): the target's result replaces
// this record's, and a target without a record is a permerror.
func (ch *checker) redirect(ctx context.Context, spec, domain string) (Status, string, string) {
	if err := ch.count(); err != nil {
		return err.status, "", err.reason
	}
	target, err := ch.expand(ctx, spec, domain)
	if err != nil {
		return Permerror, "", err.Error()
	}
	status, mech, reason := ch.checkHost(ctx, target)
	if status == None {
		return Permerror, "", fmt.Sprintf("redirect=%s: %s", target, reason)
	}
	return status, mech, reason
}

// count counts a term that causes DNS lookups against the limit of 10.
func (ch *checker) count() *checkError {
	ch.lookups++
	if ch.lookups > MaxLookups {
		return permerror("more than %d DNS lookups (RFC 7208 section 4.6.4)", MaxLookups)
	}
	return nil
}

// lookupFailed turns a failed lookup into a void lookup (at most 2) or a
// temperror.
func (ch *checker) lookupFailed(what string, err error) *checkError {
	if !isNotFound(err) {
		return temperror("%s: %v", what, err)
	}
	ch.voids++
	if ch.voids > MaxVoidLookups {
		return permerror("more than %d void DNS lookups (RFC 7208 section 4.6.4)", MaxVoidLookups)
	}
	return nil
}

// match reports whether directive d of domain's record matches the client.
func (ch *checker) match(ctx context.Context, d Directive, domain string) (bool, error) {
	if d.LooksUpDNS() {
		if err := ch.count(); err != nil {
			return false, err
		}
	}
	target := domain
	if d.DomainSpec != "" {
		t, err := ch.expand(ctx, d.DomainSpec, domain)
		if err != nil {
			return false, err
		}
		target = t
	}
	switch d.Mechanism {
	case "all":
		return true, nil
	case "ip4", "ip6":
		return d.Network.Contains(ch.c.IP), nil
	case "a":
		return ch.matchA(ctx, d, target)
	case "mx":
		return ch.matchMX(ctx, d, target)
	case "include":
		return ch.include(ctx, target)
	case "exists":
		_, err := ch.r.LookupNetIP(ctx, "ip4", target)
		if err != nil {
			return false, nilIfNil(ch.lookupFailed("exists:"+target, err))
		}
		return true, nil
	case "ptr":
		return ch.matchPTR(ctx, target)
	}
	return false, permerror("unknown mechanism %q", d.Mechanism)
}

// nilIfNil keeps a nil *checkError from becoming a non-nil error.
func nilIfNil(e *checkError) error {
	if e == nil {
		return nil
	}
	return e
}

// include evaluates include:target (section 5.2).
func (ch *checker) include(ctx context.Context, target string) (bool, error) {
	status, _, reason := ch.checkHost(ctx, target)
	switch status {
	case Pass:
		return true, nil
	case Fail, Softfail, Neutral:
		return false, nil
	case Temperror:
		return false, temperror("include:%s: %s", target, reason)
	}
	return false, permerror("include:%s: %s", target, reason)
}

// family returns the LookupNetIP network of the client's address.
func (ch *checker) family() string {
	if ch.c.IP.Is4() {
		return "ip4"
	}
	return "ip6"
}

// inCIDR reports whether the client is in addr's network of the
// mechanism's dual-cidr-length.
func (ch *checker) inCIDR(d Directive, addr netip.Addr) bool {
	addr = addr.Unmap()
	bits := d.IP6CIDR
	if addr.Is4() {
		bits = d.IP4CIDR
	}
	if bits < 0 {
		bits = addr.BitLen()
	}
	p, err := addr.Prefix(bits)
	return err == nil && p.Contains(ch.c.IP)
}

// matchA evaluates a:target (section 5.3).
func (ch *checker) matchA(ctx context.Context, d Directive, target string) (bool, error) {
	addrs, err := ch.r.LookupNetIP(ctx, ch.family(), target)
	if err != nil {
		return false, nilIfNil(ch.lookupFailed("a:"+target, err))
	}
	for _, a := range addrs {
		if ch.inCIDR(d, a) {
			return true, nil
		}
	}
	return false, nil
}

// matchMX evaluates mx:target (section 5.4): at most 10 MX hosts.
func (ch *checker) matchMX(ctx context.Context, d Directive, target string) (bool, error) {
	mxs, err := ch.r.LookupMX(ctx, target)
	if err != nil {
		return false, nilIfNil(ch.lookupFailed("mx:"+target, err))
	}
	if len(mxs) > MaxMXHosts {
		return false, permerror("mx:%s has %d MX hosts; at most %d are allowed", target, len(mxs), MaxMXHosts)
	}
	for _, mx := range mxs {
		if mx.Host == "." || mx.Host == "" {
			continue
		}
		addrs, err := ch.r.LookupNetIP(ctx, ch.family(), mx.Host)
		if err != nil {
			if e := ch.lookupFailed("mx host "+mx.Host, err); e != nil {
				return false, e
			}
			continue
		}
		for _, a := range addrs {
			if ch.inCIDR(d, a) {
				return true, nil
			}
		}
	}
	return false, nil
}

// validatedNames returns the client's PTR names that resolve back to its
// address (section 5.5), looking at most MaxPTRNames names.
func (ch *checker) validatedNames(ctx context.Context) ([]string, error) {
	pr, ok := ch.r.(PTRResolver)
	if !ok {
		return nil, nil
	}
	names, err := pr.LookupAddr(ctx, ch.c.IP)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var valid []string
	for i, name := range names {
		if i == MaxPTRNames {
			break
		}
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		addrs, err := ch.r.LookupNetIP(ctx, ch.family(), name)
		if err != nil {
			continue // section 5.5: a lookup error for one name is skipped
		}
		for _, a := range addrs {
			if a.Unmap() == ch.c.IP {
				valid = append(valid, name)
				break
			}
		}
	}
	return valid, nil
}

// matchPTR evaluates ptr:target (section 5.5). A PTR lookup failure is no
// match, not an error.
func (ch *checker) matchPTR(ctx context.Context, target string) (bool, error) {
	names, _ := ch.validatedNames(ctx)
	for _, n := range names {
		if n == target || strings.HasSuffix(n, "."+target) {
			return true, nil
		}
	}
	return false, nil
}

// lookupSPF finds the single SPF record of domain (sections 4.4 and 4.5).
func lookupSPF(ctx context.Context, r Resolver, domain string) (string, []string, Status, error) {
	txts, err := r.LookupTXT(ctx, domain)
	if err != nil {
		if isNotFound(err) {
			return "", nil, None, nil
		}
		return "", nil, Temperror, fmt.Errorf("looking up the SPF record of %s failed: %w", domain, err)
	}
	var spfs []string
	for _, t := range txts {
		if IsSPF(t) {
			spfs = append(spfs, t)
		}
	}
	switch len(spfs) {
	case 0:
		return "", nil, None, nil
	case 1:
		return spfs[0], spfs, Pass, nil
	}
	return "", spfs, Permerror, fmt.Errorf("%s publishes %d SPF records; RFC 7208 section 4.5 requires exactly one", domain, len(spfs))
}

// validDomain reports whether domain is a multi-label domain name with
// labels of 1 to 63 octets and at most 253 octets in all (section 4.3).
func validDomain(domain string) bool {
	if len(domain) == 0 || len(domain) > 253 || !strings.Contains(domain, ".") {
		return false
	}
	for _, l := range strings.Split(domain, ".") {
		if len(l) == 0 || len(l) > 63 {
			return false
		}
	}
	return true
}

// expand expands the macros of a domain-spec (section 7) for the client
// being checked. A result over 253 octets loses labels on the left (section
// 7.3).
func (ch *checker) expand(ctx context.Context, spec, domain string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(spec) {
			return "", permerror("macro string %q ends with %%", spec)
		}
		if esc, ok := macroEscape(spec[i+1]); ok {
			b.WriteString(esc)
			i++
			continue
		}
		switch spec[i+1] {
		case '{':
		default:
			return "", permerror("invalid macro in %q", spec)
		}
		end := strings.IndexByte(spec[i:], '}')
		if end < 0 {
			return "", permerror("unterminated macro in %q", spec)
		}
		v, err := ch.macro(ctx, spec[i+2:i+end], domain)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		i += end
	}
	out := strings.ToLower(strings.TrimSuffix(b.String(), "."))
	for len(out) > 253 {
		dot := strings.IndexByte(out, '.')
		if dot < 0 {
			return "", permerror("macro expansion of %q is too long", spec)
		}
		out = out[dot+1:]
	}
	return out, nil
}

// macro expands one macro body, e.g. "ir" or "d2" (section 7.2 and 7.3).
func (ch *checker) macro(ctx context.Context, inner, domain string) (string, error) {
	letter, digits, reverse, err := parseMacro(inner)
	if err != nil {
		return "", permerror("%v", err)
	}
	value, err := ch.macroValue(ctx, toLower(letter), domain)
	if err != nil {
		return "", err
	}
	out := transformMacro(value, inner, digits, reverse)
	if isUpper(letter) {
		out = urlEscape(out)
	}
	return out, nil
}

// macroValue is the value of a macro letter (section 7.2).
func (ch *checker) macroValue(ctx context.Context, letter byte, domain string) (string, error) {
	local, senderDomain := splitSender(ch.c.Sender, ch.c.Helo)
	switch letter {
	case 's':
		return local + "@" + senderDomain, nil
	case 'l':
		return local, nil
	case 'o':
		return senderDomain, nil
	case 'd':
		return domain, nil
	case 'i':
		return dottedIP(ch.c.IP), nil
	case 'v':
		if ch.c.IP.Is4() {
			return "in-addr", nil
		}
		return "ip6", nil
	case 'h':
		return ch.c.Helo, nil
	case 'p':
		names, _ := ch.validatedNames(ctx)
		if len(names) == 0 {
			return "unknown", nil
		}
		return names[0], nil
	}
	return "", permerror("macro letter %q is only allowed in exp", letter)
}

// dottedIP is the %{i} form of an address: dotted decimal for IPv4, dotted
// nibbles for IPv6.
func dottedIP(ip netip.Addr) string {
	if ip.Is4() {
		return ip.String()
	}
	b := ip.As16()
	nibbles := make([]string, 0, 32)
	for _, x := range b {
		nibbles = append(nibbles, strconv.FormatUint(uint64(x>>4), 16), strconv.FormatUint(uint64(x&0xf), 16))
	}
	return strings.Join(nibbles, ".")
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

// urlEscape escapes every character outside the URI "unreserved" set (RFC
// 3986 section 2.3), as section 7.3 asks for upper-case macro letters.
func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || isDigit(c) || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// ReverseName is the PTR query name of an address (RFC 1035 section 3.5,
// RFC 3596 section 2.5).
func ReverseName(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0])
	}
	parts := strings.Split(dottedIP(ip), ".")
	for l, r := 0, len(parts)-1; l < r; l, r = l+1, r-1 {
		parts[l], parts[r] = parts[r], parts[l]
	}
	return strings.Join(parts, ".") + ".ip6.arpa."
}
