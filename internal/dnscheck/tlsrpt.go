package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// maxTLSRPTRecordLength caps ParseTLSRPT's input.
const maxTLSRPTRecordLength = 2048

// TLSRPTRecord is a parsed _smtp._tls record (RFC 8460 section 3).
type TLSRPTRecord struct {
	// RUA are the report destinations: mailto: or https: URIs.
	RUA []string `json:"rua"`
}

// IsTLSRPT reports whether a TXT record is a TLS-RPT record; RFC 8460
// section 3 discards records that do not start with "v=TLSRPTv1;".
func IsTLSRPT(txt string) bool {
	return strings.HasPrefix(txt, "v=TLSRPTv1;") || txt == "v=TLSRPTv1"
}

// ParseTLSRPT parses a TLS-RPT record: "v=TLSRPTv1; rua=<uri>[,<uri>...]".
func ParseTLSRPT(s string) (*TLSRPTRecord, error) {
	if len(s) > maxTLSRPTRecordLength {
		return nil, fmt.Errorf("record is longer than %d characters", maxTLSRPTRecordLength)
	}
	fields, err := splitFields(s, "v", "TLSRPTv1")
	if err != nil {
		return nil, err
	}
	rec := &TLSRPTRecord{}
	for _, f := range fields {
		if f.name != "rua" {
			continue // tlsrpt-extension, ignored
		}
		for _, raw := range strings.Split(f.value, ",") {
			raw = strings.TrimSpace(raw)
			u, err := url.Parse(raw)
			if err != nil {
				return nil, fmt.Errorf("rua %q is not a URI", raw)
			}
			switch strings.ToLower(u.Scheme) {
			case "mailto":
				if !strings.Contains(u.Opaque, "@") {
					return nil, fmt.Errorf("rua %q has no email address", raw)
				}
			case "https":
				if u.Host == "" {
					return nil, fmt.Errorf("rua %q has no host", raw)
				}
			default:
				return nil, fmt.Errorf("rua %q must be a mailto: or https: URI", raw)
			}
			rec.RUA = append(rec.RUA, raw)
		}
	}
	if len(rec.RUA) == 0 {
		return nil, errors.New("the rua field is missing")
	}
	return rec, nil
}

// MailtoAddress returns the lower-cased email address of a mailto: URI
// (percent-decoding undone, any ?header part dropped); ok is false for
// another scheme.
func MailtoAddress(uri string) (addr string, ok bool) {
	uri = strings.TrimSpace(uri)
	if len(uri) < len("mailto:") || !strings.EqualFold(uri[:len("mailto:")], "mailto:") {
		return "", false
	}
	addr = uri[len("mailto:"):]
	if unescaped, err := url.PathUnescape(addr); err == nil {
		addr = unescaped
	}
	addr, _, _ = strings.Cut(addr, "?")
	return strings.ToLower(addr), true
}

// ProposeTLSRPT is the one TLS-RPT record mailwatch proposes for domain
// (the DNS check's instruction, the DNS recommendation, the reporting-address
// instructions): the current rua URIs, kept as written (none when the domain
// has no record), with mailto:addr appended; addr "" means
// postmaster@<domain>, the one mailbox every mail domain must have (RFC 5321
// section 4.5.1). When a current URI already mails an address of ours, the
// URIs are kept as they are and named is true. ours gets a lower-cased
// address; nil means addr alone.
func ProposeTLSRPT(domain string, current []string, addr string, ours func(addr string) bool) (record string, named bool) {
	if addr == "" {
		addr = "postmaster@" + domain
	}
	if ours == nil {
		ours = func(a string) bool { return strings.EqualFold(a, addr) }
	}
	rua := make([]string, 0, len(current)+1)
	for _, u := range current {
		rua = append(rua, u)
		if a, ok := MailtoAddress(u); ok && ours(a) {
			named = true
		}
	}
	if !named {
		rua = append(rua, "mailto:"+addr)
	}
	return "v=TLSRPTv1; rua=" + strings.Join(rua, ","), named
}

// TLSRPTResult is the TLS-RPT check's result.
type TLSRPTResult struct {
	Result
	RUA []string `json:"rua,omitempty"`
}

// CheckTLSRPT checks the domain's SMTP TLS reporting record (RFC 8460).
// Status: pass, none, permerror, temperror.
func CheckTLSRPT(ctx context.Context, r Resolver, domain string) *TLSRPTResult {
	res := &TLSRPTResult{}
	defer res.finish()
	name := "_smtp._tls." + domain
	txts, err := r.LookupTXT(ctx, name)
	if IsTemporary(err) {
		res.Status = StatusTemperror
		res.errorf("looking up %s failed: %v", name, err)
		return res
	}
	for _, t := range txts {
		if IsTLSRPT(t) {
			res.Records = append(res.Records, t)
		}
	}
	switch len(res.Records) {
	case 0:
		res.Status = StatusNone
		res.errorf("no TLS-RPT record at %s", name)
		rec, _ := ProposeTLSRPT(domain, nil, "", nil)
		res.instructf("Publish a TXT record at %s: \"%s\" to receive reports of TLS failures delivering to you.", name, rec)
		return res
	case 1:
	default:
		res.Status = StatusPermerror
		res.errorf("%s has %d TLS-RPT records; senders ignore them all (RFC 8460 section 3)", name, len(res.Records))
		return res
	}
	rec, err := ParseTLSRPT(res.Records[0])
	if err != nil {
		res.Status = StatusPermerror
		res.errorf("invalid TLS-RPT record: %v", err)
		return res
	}
	res.RUA = rec.RUA
	res.Status = StatusPass
	return res
}
