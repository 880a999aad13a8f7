package mxprobe

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// TLSA usages, selectors and matching types (RFC 6698 section 2.1, names
// from RFC 7218).
const (
	UsagePKIXTA = 0
	UsagePKIXEE = 1
	UsageDANETA = 2
	UsageDANEEE = 3
)

// maxTLSARecords caps the records considered per lookup.
const maxTLSARecords = 32

// TLSAStatus is the outcome of the TLSA lookup for an MX host.
type TLSAStatus string

// TLSA lookup statuses.
const (
	// TLSANone: no TLSA records (NXDOMAIN or NODATA).
	TLSANone TLSAStatus = "none"
	// TLSAUnsigned: records exist but the answer was not DNSSEC-validated
	// (no AD bit). Senders ignore them (RFC 7672 section 2.2), so DANE is
	// not published.
	TLSAUnsigned TLSAStatus = "unsigned"
	// TLSAPublished: records exist under a validated answer.
	TLSAPublished TLSAStatus = "published"
	// TLSATemporary: the lookup failed (timeout, SERVFAIL); unknown.
	TLSATemporary TLSAStatus = "temporary"
)

// TLSALookup is the TLSA lookup for an MX host.
type TLSALookup struct {
	// Name is the queried name, "_<port>._tcp.<host>".
	Name   string     `json:"name"`
	Status TLSAStatus `json:"status"`
	// Records are the TLSA records found (also when unsigned).
	Records []TLSARecord `json:"records,omitempty"`
	// Error is the lookup failure when Status is temporary.
	Error string `json:"error,omitempty"`
}

// Published reports whether DANE applies: records under a validated answer.
func (l TLSALookup) Published() bool { return l.Status == TLSAPublished }

// TLSARecord is one TLSA record.
type TLSARecord struct {
	Usage        uint8 `json:"usage"`
	Selector     uint8 `json:"selector"`
	MatchingType uint8 `json:"matching_type"`
	// Data is the certificate association data, lower-case hex.
	Data string `json:"data"`
}

// String renders the record's data as in a zone file, e.g. "3 1 1 ab12...".
func (r TLSARecord) String() string {
	return fmt.Sprintf("%d %d %d %s", r.Usage, r.Selector, r.MatchingType, r.Data)
}

// Usable reports whether SMTP senders use the record: usages DANE-TA(2) and
// DANE-EE(3) only (RFC 7672 section 3.1.3), selectors 0 and 1, matching
// types 0 to 2.
func (r TLSARecord) Usable() bool {
	return (r.Usage == UsageDANETA || r.Usage == UsageDANEEE) && r.Selector <= 1 && r.MatchingType <= 2
}

// DANEStatus is the DANE outcome for one address.
type DANEStatus string

// DANE statuses.
const (
	// DANEMatched: a usable record matches the presented chain.
	DANEMatched DANEStatus = "matched"
	// DANEMismatch: usable records exist and none matches.
	DANEMismatch DANEStatus = "mismatch"
	// DANENoTLS: DANE is published but no TLS session was established
	// (STARTTLS missing or the handshake failed): DANE senders defer.
	DANENoTLS DANEStatus = "no_tls"
	// DANEUnusable: only records SMTP does not use (PKIX-TA, PKIX-EE, or
	// unknown parameters). RFC 7672 section 2.2 makes senders require TLS
	// without authenticating it, so the PKIX verdict stands.
	DANEUnusable DANEStatus = "unusable"
)

// DANEResult is the TLSA matching for one address.
type DANEResult struct {
	Status DANEStatus `json:"status"`
	// Records are the TLSA records with the outcome for each.
	Records []TLSAMatch `json:"records"`
	// Rollover reports whether a next key is pre-published: a usable record
	// matches and another usable record does not match the current chain,
	// so the certificate can be replaced without a DANE outage (RFC 7671
	// section 8.1).
	Rollover bool `json:"rollover"`
}

// TLSAMatch is one record's outcome against a chain.
type TLSAMatch struct {
	TLSARecord
	Usable  bool `json:"usable"`
	Matched bool `json:"matched"`
	// Detail says why a record did not match when the reason is not
	// simply a different digest.
	Detail string `json:"detail,omitempty"`
}

// lookupTLSA queries the TLSA records of host at port through r. The
// resolver follows CNAMEs; the AD bit of the final answer decides whether
// DANE is published.
func lookupTLSA(ctx context.Context, r dnscheck.Resolver, host string, port int) TLSALookup {
	l := TLSALookup{Name: fmt.Sprintf("_%d._tcp.%s", port, host)}
	a, err := r.Query(ctx, l.Name, dns.TypeTLSA)
	switch {
	case dnscheck.IsNotFound(err):
		l.Status = TLSANone
		return l
	case err != nil:
		l.Status = TLSATemporary
		l.Error = cleanText(err.Error())
		return l
	}
	for _, rr := range a.Records {
		t, ok := rr.(*dns.TLSA)
		if !ok {
			continue
		}
		if len(l.Records) == maxTLSARecords {
			break
		}
		l.Records = append(l.Records, TLSARecord{
			Usage: t.Usage, Selector: t.Selector, MatchingType: t.MatchingType,
			Data: strings.ToLower(t.Certificate),
		})
	}
	switch {
	case len(l.Records) == 0:
		l.Status = TLSANone
	case a.Authenticated:
		l.Status = TLSAPublished
	default:
		l.Status = TLSAUnsigned
	}
	return l
}

// matchDANE matches published records against a presented chain (nil when
// no TLS session was established), checking DANE-TA chains for host at now.
func matchDANE(records []TLSARecord, chain []*x509.Certificate, host string, now time.Time) *DANEResult {
	res := &DANEResult{}
	usable, matched := 0, 0
	for _, rec := range records {
		m := TLSAMatch{TLSARecord: rec, Usable: rec.Usable()}
		if !m.Usable {
			m.Detail = "SMTP senders ignore this record: only usages 2 (DANE-TA) and 3 (DANE-EE) with selector 0 or 1 and matching type 0, 1 or 2 are used (RFC 7672 section 3.1.3)"
		} else {
			usable++
			if len(chain) > 0 {
				m.Matched, m.Detail = matchRecord(rec, chain, host, now)
			}
			if m.Matched {
				matched++
			}
		}
		res.Records = append(res.Records, m)
	}
	switch {
	case usable == 0:
		res.Status = DANEUnusable
	case len(chain) == 0:
		res.Status = DANENoTLS
	case matched > 0:
		res.Status = DANEMatched
		res.Rollover = matched < usable
	default:
		res.Status = DANEMismatch
	}
	return res
}

// matchRecord matches one usable record. DANE-EE (3) matches the leaf
// only, with no name or expiry check (RFC 7672 section 3.1.1). DANE-TA (2)
// matches a certificate of the chain (or, for "2 0 0", the full
// certificate in the record) that must then anchor a valid chain for the
// MX host name (RFC 7672 section 3.1.2).
func matchRecord(rec TLSARecord, chain []*x509.Certificate, host string, now time.Time) (bool, string) {
	if rec.Usage == UsageDANEEE {
		return certMatches(rec, chain[0]), ""
	}
	var anchor *x509.Certificate
	if rec.Selector == 0 && rec.MatchingType == 0 {
		if der, err := hex.DecodeString(rec.Data); err == nil {
			if c, err := x509.ParseCertificate(der); err == nil {
				anchor = c
			}
		}
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		if anchor == nil && certMatches(rec, c) {
			anchor = c
			continue
		}
		inter.AddCert(c)
	}
	if anchor == nil && certMatches(rec, chain[0]) {
		anchor = chain[0]
	}
	if anchor == nil {
		return false, ""
	}
	roots := x509.NewCertPool()
	roots.AddCert(anchor)
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now, DNSName: host,
		// RFC 7672 puts no extended key usage requirement on the chain.
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return false, "the record matches a trust anchor, but the chain does not verify from it: " + cleanText(err.Error())
	}
	return true, ""
}

// certMatches compares a record's data with the certificate's, using miekg/dns's
// CertificateToDANE for the selector and matching type. The comparison
// ignores case: the wire format gives lower-case hex, zone text may not.
func certMatches(rec TLSARecord, c *x509.Certificate) bool {
	data, err := dns.CertificateToDANE(rec.Selector, rec.MatchingType, c)
	return err == nil && strings.EqualFold(data, rec.Data)
}
