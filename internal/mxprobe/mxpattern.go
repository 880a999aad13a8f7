package mxprobe

import "strings"

// maxNameLength is the longest domain name in presentation form (RFC 1035
// section 2.3.4, without the trailing dot).
const maxNameLength = 253

// MatchMX reports whether the MX host name matches an MTA-STS policy's mx
// pattern (RFC 8461 section 4.1): equal ignoring case and a trailing dot,
// or, for a pattern "*.example.com", the host is exactly one label followed
// by ".example.com". The wildcard never matches "example.com" itself nor
// two labels ("a.b.example.com"), and is allowed only as the whole leftmost
// label. Names longer than a domain name can be never match.
func MatchMX(pattern, host string) bool {
	pattern = normalizeName(pattern)
	host = normalizeName(host)
	if pattern == "" || host == "" || len(pattern) > maxNameLength || len(host) > maxNameLength {
		return false
	}
	if !plainName(host) {
		return false
	}
	rest, wild := strings.CutPrefix(pattern, "*.")
	if !wild {
		return pattern == host
	}
	_, parent, _ := strings.Cut(host, ".")
	return plainName(rest) && parent == rest
}

// plainName reports whether s is a name without wildcard and without empty
// labels.
func plainName(s string) bool {
	return s != "" && !strings.Contains(s, "*") && !strings.Contains(s, "..") &&
		!strings.HasPrefix(s, ".") && !strings.HasSuffix(s, ".")
}

// MatchesAny reports whether host matches one of the patterns.
func MatchesAny(patterns []string, host string) bool {
	for _, p := range patterns {
		if MatchMX(p, host) {
			return true
		}
	}
	return false
}

// normalizeName lower-cases ASCII and drops one trailing dot.
func normalizeName(s string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), "."))
}
