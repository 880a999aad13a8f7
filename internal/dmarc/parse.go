package dmarc

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
)

// MaxRecordLength caps the input of ParseRecord; real records are well
// under 1000 characters.
const MaxRecordLength = 4096

// ErrSyntax is wrapped by every error ParseRecord returns.
var ErrSyntax = errors.New("dmarc syntax error")

// Policy values of the p, sp and np tags (RFC 7489 section 6.3).
const (
	PolicyNone       = "none"
	PolicyQuarantine = "quarantine"
	PolicyReject     = "reject"
)

// Alignment modes of adkim and aspf (RFC 7489 section 3.1).
const (
	AlignRelaxed = "r"
	AlignStrict  = "s"
)

// Record is a parsed DMARC record: the tags of RFC 7489 section 6.3 and the
// tags DMARCbis (draft-ietf-dmarc-dmarcbis) adds.
type Record struct {
	// Policy is p: none, quarantine or reject. Empty if absent, which RFC
	// 7489 section 6.6.3 treats as none when rua has a valid URI.
	Policy string `json:"p,omitempty"`
	// SubdomainPolicy is sp; empty means Policy applies.
	SubdomainPolicy string `json:"sp,omitempty"`
	// NonexistentPolicy is np (DMARCbis): the policy for subdomains that do
	// not exist; empty means SubdomainPolicy applies.
	NonexistentPolicy string `json:"np,omitempty"`
	// ADKIM and ASPF are the alignment modes, "r" (default) or "s".
	ADKIM string `json:"adkim"`
	ASPF  string `json:"aspf"`
	// Percent is pct (default 100); DMARCbis removes it.
	Percent int `json:"pct"`
	// AggregateURIs are the rua destinations.
	AggregateURIs []URI `json:"rua,omitempty"`
	// FailureURIs are the ruf destinations.
	FailureURIs []URI `json:"ruf,omitempty"`
	// FailureOptions is fo (default "0").
	FailureOptions string `json:"fo"`
	// ReportFormat is rf (default "afrf"); DMARCbis removes it.
	ReportFormat string `json:"rf"`
	// ReportInterval is ri in seconds (default 86400); DMARCbis removes it.
	ReportInterval int `json:"ri"`
	// Testing is t (DMARCbis): "y" asks receivers to apply one policy level
	// less strict. Default "n".
	Testing string `json:"t"`
	// PSD is psd (DMARCbis): "y" for a public suffix domain, "n" for an
	// organizational domain, "u" (default) for unknown.
	PSD string `json:"psd"`
	// Tags are the tag names in the order written.
	Tags []string `json:"-"`
	// Unknown are tags neither RFC 7489 nor DMARCbis define; section 6.3
	// says to ignore them.
	Unknown []string `json:"unknown,omitempty"`
}

// URI is a report destination with its optional size limit (RFC 7489
// section 6.2: dmarc-uri = URI [ "!" 1*DIGIT [ "k" / "m" / "g" / "t" ] ]).
type URI struct {
	// Raw is the URI as written, without the size limit.
	Raw string `json:"uri"`
	// Scheme is the lower-case scheme, normally "mailto".
	Scheme string `json:"scheme"`
	// Address is the mailbox of a mailto URI.
	Address string `json:"address,omitempty"`
	// Domain is the lower-case domain of Address.
	Domain string `json:"domain,omitempty"`
	// MaxSize is the size limit in bytes, 0 when none.
	MaxSize uint64 `json:"max_size,omitempty"`
}

// IsDMARC reports whether a TXT record is a DMARC record: it starts with
// "v=DMARC1", optionally followed by spaces and ";" (RFC 7489 section 6.4;
// receivers discard records that do not).
func IsDMARC(txt string) bool {
	v, _, _ := strings.Cut(txt, ";")
	k, val, ok := strings.Cut(v, "=")
	return ok && strings.TrimRight(k, " \t") == "v" && strings.Trim(val, " \t") == "DMARC1"
}

// ParseRecord parses a DMARC record. Invalid values of known tags are
// errors; unknown tags are kept in Unknown.
func ParseRecord(s string) (*Record, error) {
	if len(s) > MaxRecordLength {
		return nil, fmt.Errorf("%w: record is longer than %d characters", ErrSyntax, MaxRecordLength)
	}
	if !IsDMARC(s) {
		return nil, fmt.Errorf("%w: record does not start with \"v=DMARC1\"", ErrSyntax)
	}
	r := &Record{ADKIM: AlignRelaxed, ASPF: AlignRelaxed, Percent: 100, FailureOptions: "0", ReportFormat: "afrf", ReportInterval: 86400, Testing: "n", PSD: "u"}
	seen := map[string]bool{}
	parts := strings.Split(s, ";")
	for _, part := range parts[1:] {
		part = strings.TrimSpace(part)
		if part == "" {
			// A trailing ";" is allowed (section 6.4); empty parts between
			// tags are tolerated by receivers.
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a tag=value pair", ErrSyntax, part)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if seen[k] {
			return nil, fmt.Errorf("%w: tag %q appears more than once", ErrSyntax, k)
		}
		seen[k] = true
		r.Tags = append(r.Tags, k)
		var err error
		switch k {
		case "v":
			err = errors.New("v must be the first tag, and only once")
		case "p":
			r.Policy, err = parsePolicy(v)
		case "sp":
			r.SubdomainPolicy, err = parsePolicy(v)
		case "np":
			r.NonexistentPolicy, err = parsePolicy(v)
		case "adkim":
			r.ADKIM, err = parseAlignment(v)
		case "aspf":
			r.ASPF, err = parseAlignment(v)
		case "pct":
			r.Percent, err = strconv.Atoi(v)
			if err != nil || r.Percent < 0 || r.Percent > 100 || len(v) > 3 {
				err = fmt.Errorf("pct must be a number from 0 to 100, not %q", v)
			}
		case "rua":
			r.AggregateURIs, err = parseURIs(v)
		case "ruf":
			r.FailureURIs, err = parseURIs(v)
		case "fo":
			r.FailureOptions, err = parseFailureOptions(v)
		case "rf":
			r.ReportFormat = strings.ToLower(v)
			for _, f := range strings.Split(r.ReportFormat, ":") {
				if !isKeyword(f) {
					err = fmt.Errorf("rf must be a list of report formats such as \"afrf\", not %q", v)
				}
			}
		case "ri":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 32)
			if err != nil {
				err = fmt.Errorf("ri must be a number of seconds, not %q", v)
			}
			r.ReportInterval = int(n)
		case "t":
			r.Testing, err = parseChoice(v, "y", "n")
		case "psd":
			r.PSD, err = parseChoice(v, "y", "n", "u")
		default:
			r.Unknown = append(r.Unknown, k)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: tag %s: %w", ErrSyntax, k, err)
		}
	}
	return r, nil
}

func parsePolicy(v string) (string, error) {
	return parseChoice(v, PolicyNone, PolicyQuarantine, PolicyReject)
}

func parseAlignment(v string) (string, error) {
	return parseChoice(v, AlignRelaxed, AlignStrict)
}

func parseChoice(v string, choices ...string) (string, error) {
	lv := strings.ToLower(v)
	for _, c := range choices {
		if lv == c {
			return c, nil
		}
	}
	return "", fmt.Errorf("value must be one of %s, not %q", strings.Join(choices, ", "), v)
}

// parseFailureOptions checks fo: a colon-separated list of 0, 1, d and s.
func parseFailureOptions(v string) (string, error) {
	for _, o := range strings.Split(v, ":") {
		switch strings.TrimSpace(strings.ToLower(o)) {
		case "0", "1", "d", "s":
		default:
			return "", fmt.Errorf("fo must be a list of 0, 1, d and s, not %q", v)
		}
	}
	return strings.ToLower(v), nil
}

// parseURIs parses a comma-separated list of dmarc-uri.
func parseURIs(v string) ([]URI, error) {
	var uris []URI
	for _, raw := range strings.Split(v, ",") {
		raw = strings.TrimSpace(raw)
		u, err := parseURI(raw)
		if err != nil {
			return nil, err
		}
		uris = append(uris, u)
	}
	return uris, nil
}

func parseURI(raw string) (URI, error) {
	var u URI
	if raw == "" {
		return u, errors.New("empty URI")
	}
	if i := strings.LastIndexByte(raw, '!'); i >= 0 {
		full := raw
		size := raw[i+1:]
		raw = raw[:i]
		mult := uint64(1)
		if size != "" {
			switch size[len(size)-1] {
			case 'k', 'K':
				mult = 1 << 10
			case 'm', 'M':
				mult = 1 << 20
			case 'g', 'G':
				mult = 1 << 30
			case 't', 'T':
				mult = 1 << 40
			}
			if mult != 1 {
				size = size[:len(size)-1]
			}
		}
		n, err := strconv.ParseUint(size, 10, 32)
		if err != nil || n == 0 {
			return u, fmt.Errorf("invalid size limit in %q: use a number with an optional k, m, g or t", full)
		}
		u.MaxSize = n * mult
	}
	u.Raw = raw
	pu, err := url.Parse(raw)
	if err != nil || pu.Scheme == "" {
		return u, fmt.Errorf("%q is not a URI; use mailto:address@example.com", raw)
	}
	u.Scheme = strings.ToLower(pu.Scheme)
	if u.Scheme != "mailto" {
		return u, nil
	}
	addr := pu.Opaque
	if addr == "" {
		addr = pu.Path
	}
	if unescaped, err := url.PathUnescape(addr); err == nil {
		addr = unescaped
	}
	addr, _, _ = strings.Cut(addr, "?")
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr {
		return u, fmt.Errorf("%q does not have a valid email address", raw)
	}
	u.Address = addr
	at := strings.LastIndexByte(addr, '@')
	u.Domain = strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
	return u, nil
}

func isKeyword(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
