// Package emailaddr is the one normaliser of the email addresses people
// type: sign-in addresses, notification addresses and the addresses an
// identity provider vouches for. Every adapter and capability that stores
// or looks up such an address passes it through Normalise first, so two
// spellings of one address never make two accounts or miss a match.
package emailaddr

import (
	"errors"
	"net/mail"
	"strings"
)

// ErrInvalid is returned for input that is not a bare addr-spec
// (name@domain, no display name, no angle brackets).
var ErrInvalid = errors.New("not a valid email address")

// ErrNoDomainName is returned for an addr-spec whose domain is not a dotted
// domain name (a single label, a leading or trailing dot, an address
// literal).
var ErrNoDomainName = errors.New("the email address has no domain name")

// Normalise trims surrounding white space and lower-cases raw, then checks
// that the result is a bare addr-spec with a dotted domain name. It returns
// the normalised address, or ErrInvalid or ErrNoDomainName. Normalise is
// idempotent: a normalised address normalises to itself.
func Normalise(raw string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || addr.Name != "" {
		return "", ErrInvalid
	}
	domain := s[strings.LastIndexByte(s, '@')+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.HasPrefix(domain, "[") {
		return "", ErrNoDomainName
	}
	return s, nil
}
