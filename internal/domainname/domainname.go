// Package domainname normalises domain names entered by users into the form
// mailwatch stores and checks: IDNA A-labels (RFC 5890, UTS #46 lookup
// profile), lower case, no trailing dot, and never a public suffix.
//
// Errors returned by Normalize are meant to be shown to the user as is (for
// example as the detail of a 422 response); they all wrap ErrInvalid.
package domainname

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Limits from RFC 1035 section 2.3.4. The 253 is the 255-octet wire limit
// minus the length octet of the first label and the root label.
const (
	maxNameLength  = 253
	maxLabelLength = 63
	// maxInputLength caps the work done on hostile input before IDNA
	// processing; Unicode input can be longer than its A-label form.
	maxInputLength = 1024
)

// ErrInvalid is wrapped by every error Normalize returns.
var ErrInvalid = errors.New("invalid domain")

// Normalize returns the canonical ASCII form of a domain name: Unicode labels
// converted to A-labels with the IDNA lookup profile, lower case, with one
// trailing dot removed. It rejects empty labels, characters not allowed in host
// names, names or labels that are too long, IP addresses, and public suffixes
// such as "com", "co.uk" or "github.io" (a domain can only be monitored if
// someone can register it).
func Normalize(input string) (string, error) {
	s := strings.TrimSpace(input)
	if s == "" {
		return "", fmt.Errorf("%w: domain is empty", ErrInvalid)
	}
	if len(s) > maxInputLength {
		return "", fmt.Errorf("%w: domain is longer than %d characters", ErrInvalid, maxNameLength)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: domain is not valid UTF-8 text", ErrInvalid)
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", fmt.Errorf("%w: domain is empty", ErrInvalid)
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return "", fmt.Errorf("%w: %q is an IP address, not a domain name", ErrInvalid, input)
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return "", fmt.Errorf("%w: %q has an empty label (two dots in a row, or a leading dot)", ErrInvalid, input)
		}
	}
	ascii, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a valid domain name: %w", ErrInvalid, input, err)
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > maxNameLength {
		return "", fmt.Errorf("%w: domain is longer than %d characters", ErrInvalid, maxNameLength)
	}
	labels := strings.Split(ascii, ".")
	for _, label := range labels {
		if err := checkLabel(label); err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrInvalid, input, err)
		}
	}
	if len(labels) < 2 {
		return "", fmt.Errorf("%w: %q is a top-level domain; enter a domain such as example.com", ErrInvalid, input)
	}
	// RFC 3696 section 2: a top-level domain is never all-numeric.
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("%w: %q has an all-numeric top-level domain", ErrInvalid, input)
	}
	if suffix, _ := publicsuffix.PublicSuffix(ascii); suffix == ascii {
		return "", fmt.Errorf("%w: %q is a public suffix (anyone can register names under it); enter a domain registered under it instead", ErrInvalid, input)
	}
	return ascii, nil
}

// checkLabel enforces the host name rules of RFC 952 and RFC 1123 section
// 2.1 (letters, digits and hyphens, no hyphen at either end) on one A-label.
func checkLabel(label string) error {
	switch {
	case label == "":
		return errors.New("empty label")
	case len(label) > maxLabelLength:
		return fmt.Errorf("label %q is longer than %d characters", label, maxLabelLength)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q starts or ends with a hyphen", label)
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("label %q contains the character %q, which is not allowed in a domain name", label, c)
		}
	}
	return nil
}
