package blocklist

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// EnvZones is the environment variable that replaces the catalog.
const EnvZones = "BLOCKLIST_ZONES"

// Bounds on names and on BLOCKLIST_ZONES.
const (
	// maxNameLength is the longest domain name in text form without the
	// trailing dot (RFC 1035 section 2.3.4: 255 octets on the wire).
	maxNameLength = 253
	// maxLabelLength is RFC 1035's label limit.
	maxLabelLength = 63
	// ipv6QueryLength is the length of an IPv6 query prefix: 32 nibbles,
	// each followed by a dot.
	ipv6QueryLength = 64
	// MaxZoneLength leaves room under a zone for any IPv6 query name.
	MaxZoneLength = maxNameLength - ipv6QueryLength
	// MaxZones bounds the number of lists in BLOCKLIST_ZONES.
	MaxZones = 32
	// maxZonesInput bounds the text of BLOCKLIST_ZONES.
	maxZonesInput = 4096
)

// ErrInvalid is wrapped by the errors of ParseZones, ValidateZone and the
// query-name builders: the input is wrong, not the DNS.
var ErrInvalid = errors.New("blocklist: invalid input")

// Lists returns the lists to check: the catalog when env (the value of
// BLOCKLIST_ZONES) is empty or blank, otherwise ParseZones(env).
func Lists(env string) ([]List, error) {
	if strings.TrimSpace(env) == "" {
		return Catalog(), nil
	}
	return ParseZones(env)
}

// ParseZones parses BLOCKLIST_ZONES: comma-separated entries, each "zone"
// for an IP list or "zone=domain" for a domain list, with optional spaces
// around entries. The result replaces the catalog. A zone found in the
// catalog (or a subscriber's keyed zone of a catalog list, such as
// "<key>.zen.dq.spamhaus.net") keeps the catalog's metadata, its kind
// included; marking an IP list of the catalog "=domain" is an error. Any
// other zone is a generic list on which every 127.0.0.x answer is a listing
// and every 127.255.255.x answer an error.
func ParseZones(s string) ([]List, error) {
	if len(s) > maxZonesInput {
		return nil, fmt.Errorf("%w: %s is longer than %d characters", ErrInvalid, EnvZones, maxZonesInput)
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalid, EnvZones)
	}
	entries := strings.Split(s, ",")
	if len(entries) > MaxZones {
		return nil, fmt.Errorf("%w: %s has %d entries, at most %d are allowed", ErrInvalid, EnvZones, len(entries), MaxZones)
	}
	lists := make([]List, 0, len(entries))
	seen := map[string]bool{}
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("%w: %s entry %d is empty (a stray comma?)", ErrInvalid, EnvZones, i+1)
		}
		zone, kindText, hasKind := strings.Cut(entry, "=")
		kind := KindIP
		if hasKind {
			if !strings.EqualFold(strings.TrimSpace(kindText), string(KindDomain)) {
				return nil, fmt.Errorf("%w: %s entry %q: only \"=domain\" may follow a zone", ErrInvalid, EnvZones, entry)
			}
			kind = KindDomain
		}
		zone, err := ValidateZone(strings.TrimSpace(zone))
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", EnvZones, i+1, err)
		}
		if seen[zone] {
			return nil, fmt.Errorf("%w: %s lists %s twice", ErrInvalid, EnvZones, zone)
		}
		seen[zone] = true
		l, ok := catalogEntry(zone)
		switch {
		case !ok:
			l = generic(zone, kind)
		case hasKind && l.Kind != KindDomain:
			return nil, fmt.Errorf("%w: %s is an IP list (%s), it cannot be used as a domain list", ErrInvalid, zone, l.Name)
		}
		lists = append(lists, l)
	}
	return lists, nil
}

// FormatZones is the inverse of ParseZones, for logging the lists in use.
func FormatZones(lists []List) string {
	parts := make([]string, len(lists))
	for i, l := range lists {
		parts[i] = l.Zone
		if l.Kind == KindDomain {
			parts[i] += "=domain"
		}
	}
	return strings.Join(parts, ",")
}

// ValidateZone checks a list's zone name and returns it in lower case
// without trailing dot. A zone is at least two labels of letters, digits,
// hyphens and underscores, no longer than MaxZoneLength, so that every query
// name under it fits in a DNS name.
func ValidateZone(zone string) (string, error) {
	if len(zone) > MaxZoneLength+1 {
		return "", fmt.Errorf("%w: zone is longer than %d characters", ErrInvalid, MaxZoneLength)
	}
	z := strings.ToLower(strings.TrimSuffix(zone, "."))
	if z == "" {
		return "", fmt.Errorf("%w: zone is empty", ErrInvalid)
	}
	if len(z) > MaxZoneLength {
		return "", fmt.Errorf("%w: zone %q is longer than %d characters", ErrInvalid, zone, MaxZoneLength)
	}
	if _, err := netip.ParseAddr(z); err == nil {
		return "", fmt.Errorf("%w: zone %q is an IP address, not a DNS zone", ErrInvalid, zone)
	}
	if err := checkName(z, true); err != nil {
		return "", fmt.Errorf("%w: zone %q: %w", ErrInvalid, zone, err)
	}
	if !strings.Contains(z, ".") {
		return "", fmt.Errorf("%w: zone %q is a single label; write the list's full zone, e.g. zen.spamhaus.org", ErrInvalid, zone)
	}
	return z, nil
}

// checkName checks the labels of a lower-case name without trailing dot.
// Underscores are allowed when underscore is set (some zones use them).
func checkName(name string, underscore bool) error {
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("empty label (two dots in a row, or a leading dot)")
		}
		if len(label) > maxLabelLength {
			return fmt.Errorf("label longer than %d characters", maxLabelLength)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			case c == '_' && underscore:
			default:
				return fmt.Errorf("label %q has a character other than letters, digits and hyphens (convert international names to A-labels)", label)
			}
		}
	}
	return nil
}
