package mxprobe

import (
	"fmt"
	"slices"
)

// SafeToEnforce reports whether an MTA-STS policy with these mx patterns
// can move to mode "enforce" without losing mail: every MX host matches a
// pattern, and every address of every host completed a TLS handshake whose
// chain verifies (PKIX) with a certificate valid for the host name and not
// expired (RFC 8461 section 4). DANE does not count here: MTA-STS senders
// verify PKIX whatever TLSA says. Inconclusive probes are not safe.
// reasons says what stands in the way, one line per finding.
func SafeToEnforce(results []HostResult, mxPatterns []string) (safe bool, reasons []string) {
	if len(results) == 0 {
		return false, []string{"no MX host was probed"}
	}
	for _, h := range results {
		if !MatchesAny(mxPatterns, h.Host) {
			reasons = append(reasons, fmt.Sprintf("%s matches none of the policy's mx patterns", h.Host))
		}
		if len(h.Addresses) == 0 {
			reasons = append(reasons, fmt.Sprintf("%s: no address was probed", h.Host))
		}
		for _, a := range h.Addresses {
			reasons = append(reasons, addrEnforceReasons(h.Host, a)...)
		}
	}
	return len(reasons) == 0, reasons
}

func addrEnforceReasons(host string, a AddrResult) []string {
	where := fmt.Sprintf("%s (%s)", host, a.Addr)
	if a.TLS == nil {
		all := append(slices.Clone(a.Problems), a.Notes...)
		if len(all) == 0 {
			return []string{where + ": no TLS session was established"}
		}
		var out []string
		for _, p := range all {
			out = append(out, fmt.Sprintf("%s: %s: %s", where, p.Code, p.Detail))
		}
		return out
	}
	var out []string
	if !a.TLS.Verified {
		out = append(out, fmt.Sprintf("%s: the certificate chain does not verify: %s", where, a.TLS.VerifyError))
	}
	if !a.TLS.NameMatches {
		out = append(out, where+": the certificate is not valid for "+host)
	}
	if a.TLS.DaysLeft < 0 {
		out = append(out, where+": the certificate has expired")
	}
	return out
}

// Severity of a certificate-expiry notice.
type Severity string

// Severities.
const (
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// ExpiryThresholds are the days-left marks at which a certificate_expiring
// notice is raised, largest first: warnings at 30 and 14, critical at 7.
var ExpiryThresholds = []int{30, 14, 7}

// ExpiryThreshold returns the smallest threshold of ExpiryThresholds that
// daysLeft has reached (daysLeft <= threshold) and its severity; ok is false
// above 30 days. A caller raises certificate_expiring once per (certificate
// fingerprint, threshold): a certificate found at 5 days left gets the 7-day
// critical notice only, and the one at 14 days is not raised afterwards.
// An expired certificate (daysLeft < 0) is at the 7-day threshold too.
func ExpiryThreshold(daysLeft int) (threshold int, severity Severity, ok bool) {
	for i := len(ExpiryThresholds) - 1; i >= 0; i-- {
		t := ExpiryThresholds[i]
		if daysLeft <= t {
			if t <= 7 {
				return t, SeverityCritical, true
			}
			return t, SeverityWarning, true
		}
	}
	return 0, "", false
}
