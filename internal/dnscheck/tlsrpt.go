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
		res.instructf("Publish a TXT record at %s: \"v=TLSRPTv1; rua=mailto:tls-reports@%s\" to receive reports of TLS failures delivering to you.", name, domain)
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
