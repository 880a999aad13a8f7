package dmarc

import (
	"context"
	"strings"
)

// Result words of a per-message DMARC evaluation (RFC 7489 section 11.2).
const (
	ResultPass      = "pass"
	ResultFail      = "fail"
	ResultNone      = "none"
	ResultTemperror = "temperror"
	ResultPermerror = "permerror"
)

// Aligned reports whether an authenticated domain (the SPF MAIL FROM domain
// or a DKIM d=) is aligned with the RFC5322.From domain (RFC 7489 section
// 3.1): equal in strict mode ("s"), with the same organizational domain in
// relaxed mode (anything else).
func Aligned(fromDomain, authDomain, mode string) bool {
	from := strings.ToLower(strings.TrimSuffix(fromDomain, "."))
	auth := strings.ToLower(strings.TrimSuffix(authDomain, "."))
	if from == "" || auth == "" {
		return false
	}
	if from == auth {
		return true
	}
	return mode != AlignStrict && OrganizationalDomain(from) == OrganizationalDomain(auth)
}

// Authentication is what the receiver verified about a message: the SPF
// result for its MAIL FROM domain and the domains of its passing DKIM
// signatures.
type Authentication struct {
	SPFPass   bool
	SPFDomain string
	// DKIMPassDomains are the d= of the signatures that verified.
	DKIMPassDomains []string
}

// Verdict is the DMARC evaluation of one message (RFC 7489 section 6.6).
type Verdict struct {
	// FromDomain is the RFC5322.From domain the policy is looked up for.
	FromDomain string `json:"from_domain"`
	// Result is pass, fail, none, temperror or permerror.
	Result string `json:"result"`
	// RecordDomain is where the record was found (FromDomain or its
	// organizational domain).
	RecordDomain string `json:"record_domain,omitempty"`
	Record       string `json:"record,omitempty"`
	// SPFAligned and DKIMAligned say which identifier passed and aligned.
	SPFAligned  bool `json:"spf_aligned"`
	DKIMAligned bool `json:"dkim_aligned"`
	// DKIMDomain is the aligned passing d=, if any.
	DKIMDomain string `json:"dkim_domain,omitempty"`
	// Policy is the policy published for FromDomain (p, or sp when the
	// record is inherited); empty without a valid record.
	Policy string `json:"policy,omitempty"`
	// Disposition is what a receiver applying the policy would do with this
	// message: none, quarantine or reject. t=y lowers a failing message's
	// disposition by one level (DMARCbis).
	Disposition string `json:"disposition"`
	// Reason explains none, temperror and permerror.
	Reason string `json:"reason,omitempty"`
}

// Check evaluates DMARC for a message from fromDomain (RFC 7489 section
// 6.6.2): it looks up the policy, then tests whether SPF or DKIM passed
// with an identifier aligned to fromDomain.
func Check(ctx context.Context, r Resolver, fromDomain string, auth Authentication) Verdict {
	fromDomain = strings.ToLower(strings.TrimSuffix(fromDomain, "."))
	v := Verdict{FromDomain: fromDomain, Disposition: PolicyNone}
	recordDomain, records, err := Lookup(ctx, r, fromDomain)
	switch {
	case err != nil:
		v.Result, v.Reason = ResultTemperror, err.Error()
		return v
	case len(records) == 0:
		v.Result, v.Reason = ResultNone, "no DMARC record at _dmarc."+fromDomain+" nor at its organizational domain"
		return v
	case len(records) > 1:
		v.Result, v.Reason = ResultPermerror, "several DMARC records at _dmarc."+recordDomain
		return v
	}
	v.RecordDomain, v.Record = recordDomain, records[0]
	rec, err := ParseRecord(records[0])
	if err != nil {
		v.Result, v.Reason = ResultPermerror, err.Error()
		return v
	}
	v.Policy = rec.Policy
	if v.Policy == "" {
		v.Policy = PolicyNone
	}
	if recordDomain != fromDomain && rec.SubdomainPolicy != "" {
		v.Policy = rec.SubdomainPolicy
	}
	v.SPFAligned = auth.SPFPass && Aligned(fromDomain, auth.SPFDomain, rec.ASPF)
	for _, d := range auth.DKIMPassDomains {
		if Aligned(fromDomain, d, rec.ADKIM) {
			v.DKIMAligned, v.DKIMDomain = true, strings.ToLower(d)
			break
		}
	}
	if v.SPFAligned || v.DKIMAligned {
		v.Result = ResultPass
		return v
	}
	v.Result = ResultFail
	v.Disposition = v.Policy
	if rec.Testing == "y" {
		v.Disposition = map[string]string{PolicyReject: PolicyQuarantine, PolicyQuarantine: PolicyNone}[v.Policy]
		if v.Disposition == "" {
			v.Disposition = PolicyNone
		}
	}
	return v
}
