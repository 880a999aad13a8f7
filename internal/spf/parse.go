package spf

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxRecordLength caps the input of ParseRecord. A TXT record can be longer
// than one 255-octet string, but RFC 7208 section 3.4 asks records to fit in
// a 512-octet UDP answer; 4096 leaves room for records that do not while
// bounding the work on hostile input.
const MaxRecordLength = 4096

// ErrSyntax is wrapped by every error ParseRecord returns.
var ErrSyntax = errors.New("spf syntax error")

// Qualifier values (RFC 7208 section 4.6.2).
const (
	QualifierPass     = '+'
	QualifierFail     = '-'
	QualifierSoftfail = '~'
	QualifierNeutral  = '?'
)

// Record is a parsed SPF record (RFC 7208 section 12).
type Record struct {
	Directives []Directive
	// Redirect is the domain-spec of the redirect modifier (section 6.1), or
	// empty.
	Redirect string
	// Explanation is the domain-spec of the exp modifier (section 6.2), or
	// empty.
	Explanation string
	// Unknown holds unknown modifiers, which section 6 says to ignore.
	Unknown []Modifier
}

// Directive is a qualifier and a mechanism (RFC 7208 section 4.6.1).
type Directive struct {
	// Qualifier is one of QualifierPass (the default), QualifierFail,
	// QualifierSoftfail and QualifierNeutral.
	Qualifier byte
	// Mechanism is the lower-case mechanism name: all, include, a, mx, ptr,
	// ip4, ip6 or exists.
	Mechanism string
	// DomainSpec is the target of include, a, mx, ptr and exists; empty
	// means the current domain for a, mx and ptr.
	DomainSpec string
	// Network is the address range of ip4 and ip6.
	Network netip.Prefix
	// IP4CIDR and IP6CIDR are the dual-cidr-length of a and mx, -1 when
	// absent.
	IP4CIDR, IP6CIDR int
	// Raw is the term as written in the record.
	Raw string
}

// Modifier is a name=value term (RFC 7208 section 6).
type Modifier struct {
	Name  string
	Value string
}

// IsSPF reports whether a TXT record is an SPF record: it starts with
// "v=spf1" followed by a space or nothing (RFC 7208 section 4.5).
func IsSPF(txt string) bool {
	if len(txt) < 6 || !strings.EqualFold(txt[:6], "v=spf1") {
		return false
	}
	return len(txt) == 6 || txt[6] == ' '
}

// Result returns the result named by the qualifier.
func (d Directive) Result() Status {
	switch d.Qualifier {
	case QualifierFail:
		return Fail
	case QualifierSoftfail:
		return Softfail
	case QualifierNeutral:
		return Neutral
	}
	return Pass
}

// LooksUpDNS reports whether the mechanism counts against the DNS lookup
// limit of RFC 7208 section 4.6.4.
func (d Directive) LooksUpDNS() bool {
	switch d.Mechanism {
	case "include", "a", "mx", "ptr", "exists":
		return true
	}
	return false
}

// ParseRecord parses an SPF record. Unknown mechanisms, malformed terms and
// repeated redirect or exp modifiers are syntax errors, which make
// check_host return permerror (RFC 7208 sections 4.6 and 6).
func ParseRecord(s string) (*Record, error) {
	if len(s) > MaxRecordLength {
		return nil, fmt.Errorf("%w: record is longer than %d characters", ErrSyntax, MaxRecordLength)
	}
	if !IsSPF(s) {
		return nil, fmt.Errorf("%w: record does not start with \"v=spf1\"", ErrSyntax)
	}
	r := &Record{}
	var sawRedirect, sawExp bool
	// Terms are separated by one or more spaces (section 12: 1*SP). Other
	// whitespace is not allowed.
	for _, term := range strings.Split(s[6:], " ") {
		if term == "" {
			continue
		}
		if name, value, ok := splitModifier(term); ok {
			if err := checkMacroString(value); err != nil {
				return nil, fmt.Errorf("%w: modifier %q: %w", ErrSyntax, term, err)
			}
			switch name {
			case "redirect":
				if sawRedirect {
					return nil, fmt.Errorf("%w: more than one redirect modifier (RFC 7208 section 6)", ErrSyntax)
				}
				sawRedirect = true
				if err := checkDomainSpec(value); err != nil {
					return nil, fmt.Errorf("%w: redirect %q: %w", ErrSyntax, value, err)
				}
				r.Redirect = value
			case "exp":
				if sawExp {
					return nil, fmt.Errorf("%w: more than one exp modifier (RFC 7208 section 6)", ErrSyntax)
				}
				sawExp = true
				if err := checkDomainSpec(value); err != nil {
					return nil, fmt.Errorf("%w: exp %q: %w", ErrSyntax, value, err)
				}
				r.Explanation = value
			default:
				r.Unknown = append(r.Unknown, Modifier{Name: name, Value: value})
			}
			continue
		}
		d, err := parseDirective(term)
		if err != nil {
			return nil, fmt.Errorf("%w: term %q: %w", ErrSyntax, term, err)
		}
		r.Directives = append(r.Directives, d)
	}
	return r, nil
}

// splitModifier splits name=value when term is a modifier: name = ALPHA
// *( ALPHA / DIGIT / "-" / "_" / "." ) (RFC 7208 section 12). A mechanism
// never contains "=" before a ":" or "/", except inside a macro.
func splitModifier(term string) (name, value string, ok bool) {
	i := strings.IndexByte(term, '=')
	if i <= 0 {
		return "", "", false
	}
	name = term[:i]
	if !isAlpha(name[0]) {
		return "", "", false
	}
	for j := 1; j < len(name); j++ {
		c := name[j]
		if !isAlpha(c) && !isDigit(c) && c != '-' && c != '_' && c != '.' {
			return "", "", false
		}
	}
	return strings.ToLower(name), term[i+1:], true
}

func parseDirective(term string) (Directive, error) {
	d := Directive{Qualifier: QualifierPass, IP4CIDR: -1, IP6CIDR: -1, Raw: term}
	switch term[0] {
	case QualifierPass, QualifierFail, QualifierSoftfail, QualifierNeutral:
		d.Qualifier = term[0]
		term = term[1:]
	}
	name, arg := term, ""
	hasArg := false
	if i := strings.IndexAny(term, ":/"); i >= 0 {
		name, arg = term[:i], term[i:]
		hasArg = true
	}
	d.Mechanism = strings.ToLower(name)
	switch d.Mechanism {
	case "all":
		if hasArg {
			return d, errors.New("all takes no argument")
		}
	case "include", "exists":
		if !strings.HasPrefix(arg, ":") || len(arg) < 2 {
			return d, fmt.Errorf("%s requires \":domain\"", d.Mechanism)
		}
		d.DomainSpec = arg[1:]
		if err := checkDomainSpec(d.DomainSpec); err != nil {
			return d, err
		}
	case "ptr":
		if hasArg {
			if !strings.HasPrefix(arg, ":") || len(arg) < 2 {
				return d, errors.New("ptr takes only \":domain\"")
			}
			d.DomainSpec = arg[1:]
			if err := checkDomainSpec(d.DomainSpec); err != nil {
				return d, err
			}
		}
	case "a", "mx":
		spec, cidr := arg, ""
		if i := indexOutsideMacro(arg, '/'); i >= 0 {
			spec, cidr = arg[:i], arg[i:]
		}
		if spec != "" {
			if !strings.HasPrefix(spec, ":") || len(spec) < 2 {
				return d, fmt.Errorf("%s requires \":domain\" before a CIDR length", d.Mechanism)
			}
			d.DomainSpec = spec[1:]
			if err := checkDomainSpec(d.DomainSpec); err != nil {
				return d, err
			}
		}
		if cidr != "" {
			var err error
			if d.IP4CIDR, d.IP6CIDR, err = parseDualCIDR(cidr); err != nil {
				return d, err
			}
		}
	case "ip4", "ip6":
		if !strings.HasPrefix(arg, ":") {
			return d, fmt.Errorf("%s requires \":address\"", d.Mechanism)
		}
		addr, length, hasLength := strings.Cut(arg[1:], "/")
		ip, err := netip.ParseAddr(addr)
		if err != nil || ip.Zone() != "" {
			return d, fmt.Errorf("invalid address %q", addr)
		}
		// ip4-network is dotted quad only; ip6-network is any IPv6 form.
		if d.Mechanism == "ip4" && !ip.Is4() || d.Mechanism == "ip6" && !ip.Is6() {
			return d, fmt.Errorf("address %q is not an %s address", addr, d.Mechanism)
		}
		bits := ip.BitLen()
		if hasLength {
			if bits, err = parseCIDRLength(length, ip.BitLen()); err != nil {
				return d, err
			}
		}
		d.Network = netip.PrefixFrom(ip, bits)
	default:
		return d, fmt.Errorf("unknown mechanism %q", name)
	}
	return d, nil
}

// parseDualCIDR parses dual-cidr-length: [ "/" ip4-len ] [ "//" ip6-len ].
func parseDualCIDR(s string) (ip4, ip6 int, err error) {
	ip4, ip6 = -1, -1
	rest := s
	if strings.HasPrefix(rest, "//") {
		ip6, err = parseCIDRLength(rest[2:], 128)
		return ip4, ip6, err
	}
	rest = rest[1:]
	v4, v6, has6 := strings.Cut(rest, "//")
	if ip4, err = parseCIDRLength(v4, 32); err != nil {
		return -1, -1, err
	}
	if has6 {
		if ip6, err = parseCIDRLength(v6, 128); err != nil {
			return -1, -1, err
		}
	}
	return ip4, ip6, nil
}

// parseCIDRLength parses a decimal prefix length without leading zeros.
func parseCIDRLength(s string, max int) (int, error) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("invalid CIDR length %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("invalid CIDR length %q (0 to %d)", s, max)
	}
	return n, nil
}

// indexOutsideMacro returns the index of c in s outside %{...} macros.
func indexOutsideMacro(s string, c byte) int {
	depth := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '%' && i+1 < len(s) && s[i+1] == '{':
			depth = true
		case s[i] == '}' && depth:
			depth = false
		case s[i] == c && !depth:
			return i
		}
	}
	return -1
}

// checkDomainSpec checks domain-spec = macro-string domain-end (RFC 7208
// section 7.1): a macro string ending in a top label or a macro.
func checkDomainSpec(s string) error {
	if err := checkMacroString(s); err != nil {
		return err
	}
	if strings.HasSuffix(s, "}") {
		return nil
	}
	t := strings.TrimSuffix(s, ".")
	i := strings.LastIndexByte(t, '.')
	if i < 0 {
		return fmt.Errorf("domain %q has no top-level label", s)
	}
	top := t[i+1:]
	if top == "" || !isTopLabel(top) {
		return fmt.Errorf("domain %q does not end in a valid top-level label", s)
	}
	return nil
}

// isTopLabel implements toplabel: alphanumerics and hyphens with at least
// one letter, not starting or ending with a hyphen.
func isTopLabel(s string) bool {
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlpha(c):
			letter = true
		case isDigit(c):
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return letter || strings.Contains(s, "-")
}

// checkMacroString checks macro-string (RFC 7208 section 7.1).
func checkMacroString(s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if c < 0x21 || c > 0x7e {
				return fmt.Errorf("invalid character %q", c)
			}
			continue
		}
		if i+1 >= len(s) {
			return errors.New("unterminated macro")
		}
		switch s[i+1] {
		case '%', '_', '-':
			i++
			continue
		case '{':
		default:
			return fmt.Errorf("invalid macro %q", s[i:i+2])
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return errors.New("unterminated macro")
		}
		if _, _, _, err := parseMacro(s[i+2 : i+end]); err != nil {
			return err
		}
		i += end
	}
	return nil
}

// parseMacro parses the inside of %{...}: macro-letter transformers
// *delimiter.
func parseMacro(s string) (letter byte, digits int, reverse bool, err error) {
	if s == "" {
		return 0, 0, false, errors.New("empty macro")
	}
	letter = toLower(s[0])
	if !strings.ContainsRune("slodiphcrtv", rune(letter)) {
		return 0, 0, false, fmt.Errorf("unknown macro letter %q", s[0])
	}
	rest := s[1:]
	n := 0
	for n < len(rest) && isDigit(rest[n]) {
		n++
	}
	if n > 0 {
		if n > 3 {
			return 0, 0, false, errors.New("macro transformer too large")
		}
		digits, _ = strconv.Atoi(rest[:n])
		if digits == 0 {
			return 0, 0, false, errors.New("macro transformer 0 is not allowed")
		}
	}
	rest = rest[n:]
	if rest != "" && toLower(rest[0]) == 'r' {
		reverse = true
		rest = rest[1:]
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(".-+,/_=", rune(rest[i])) {
			return 0, 0, false, fmt.Errorf("invalid macro delimiter %q", rest[i])
		}
	}
	return letter, digits, reverse, nil
}

// expandDomainSpec expands the macros of a domain-spec that only uses the
// domain (%{d}) and the literal escapes (RFC 7208 section 7.3). ok is false
// when the spec uses a macro that depends on the connecting client or the
// sender, which a posture check cannot know.
func expandDomainSpec(spec, domain string) (string, bool) {
	if !strings.Contains(spec, "%") {
		return strings.TrimSuffix(spec, "."), true
	}
	var b strings.Builder
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c != '%' || i+1 >= len(spec) {
			b.WriteByte(c)
			continue
		}
		if esc, ok := macroEscape(spec[i+1]); ok {
			b.WriteString(esc)
			i++
			continue
		}
		end := strings.IndexByte(spec[i:], '}')
		if end < 0 {
			return "", false
		}
		inner := spec[i+2 : i+end]
		letter, digits, reverse, err := parseMacro(inner)
		if err != nil || letter != 'd' {
			return "", false
		}
		b.WriteString(transformMacro(domain, inner, digits, reverse))
		i += end
	}
	return strings.TrimSuffix(b.String(), "."), true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// transformMacro applies a macro's transformers to its value (RFC 7208
// section 7.3): split on the delimiters after the letter and digits
// ("." when none), reverse when asked, keep the rightmost digits parts,
// and join with dots. inner is the macro without its braces.
func transformMacro(value, inner string, digits int, reverse bool) string {
	delims := strings.TrimLeft(inner[1:], "0123456789rR")
	if delims == "" {
		delims = "."
	}
	parts := strings.FieldsFunc(value, func(r rune) bool { return strings.ContainsRune(delims, r) })
	if reverse {
		for l, r := 0, len(parts)-1; l < r; l, r = l+1, r-1 {
			parts[l], parts[r] = parts[r], parts[l]
		}
	}
	if digits > 0 && digits < len(parts) {
		parts = parts[len(parts)-digits:]
	}
	return strings.Join(parts, ".")
}

// macroEscape returns what the escape "%" c stands for (RFC 7208 section
// 7.1: %% is a percent sign, %_ a space, %- a URL-encoded space), and
// false for any other c.
func macroEscape(c byte) (string, bool) {
	switch c {
	case '%':
		return "%", true
	case '_':
		return " ", true
	case '-':
		return "%20", true
	}
	return "", false
}
