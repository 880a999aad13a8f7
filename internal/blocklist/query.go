package blocklist

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// IPQueryName returns the name to query for addr under zone (RFC 5782):
// for IPv4 the four octets in reverse order ("2.0.0.127.zone"), for IPv6
// the 32 hexadecimal nibbles in reverse order, lower case. An IPv4-mapped
// IPv6 address is queried as the IPv4 address it carries. The name has no
// trailing dot.
func IPQueryName(addr netip.Addr, zone string) (string, error) {
	zone, err := ValidateZone(zone)
	if err != nil {
		return "", err
	}
	if !addr.IsValid() {
		return "", fmt.Errorf("%w: no IP address to look up", ErrInvalid)
	}
	addr = addr.Unmap()
	var b strings.Builder
	if addr.Is4() {
		o := addr.As4()
		for i := 3; i >= 0; i-- {
			b.WriteString(strconv.Itoa(int(o[i])))
			b.WriteByte('.')
		}
	} else {
		const hex = "0123456789abcdef"
		o := addr.As16()
		b.Grow(ipv6QueryLength + len(zone))
		for i := 15; i >= 0; i-- {
			b.WriteByte(hex[o[i]&0xf])
			b.WriteByte('.')
			b.WriteByte(hex[o[i]>>4])
			b.WriteByte('.')
		}
	}
	b.WriteString(zone)
	return b.String(), nil
}

// DomainQueryName returns the name to query for domain under zone (RFC 5782
// section 2.2): the domain, lower case and without trailing dot, followed by
// the zone. The domain must be in ASCII (A-labels for international names),
// must not be an IP address (domain lists refuse those), and the whole name
// must fit in 253 characters.
func DomainQueryName(domain, zone string) (string, error) {
	zone, err := ValidateZone(zone)
	if err != nil {
		return "", err
	}
	if len(domain) > maxNameLength+1 {
		return "", fmt.Errorf("%w: domain is longer than %d characters", ErrInvalid, maxNameLength)
	}
	d := strings.ToLower(strings.TrimSuffix(domain, "."))
	if d == "" {
		return "", fmt.Errorf("%w: no domain to look up", ErrInvalid)
	}
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return "", fmt.Errorf("%w: %q is an IP address; domain lists are queried with domain names", ErrInvalid, domain)
	}
	if err := checkName(d, false); err != nil {
		return "", fmt.Errorf("%w: domain %q: %w", ErrInvalid, domain, err)
	}
	name := d + "." + zone
	if len(name) > maxNameLength {
		return "", fmt.Errorf("%w: %q under %s is longer than %d characters", ErrInvalid, domain, zone, maxNameLength)
	}
	return name, nil
}
