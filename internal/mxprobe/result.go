package mxprobe

import (
	"net/netip"
	"slices"
	"time"
)

// Verdict is the outcome of probing one address or one MX host.
type Verdict string

// Verdicts, from good to bad. Temporary sits apart: it means the probe could
// not tell, and the caller changes no stored state because of it.
const (
	// VerdictOK: a sender that verifies (MTA-STS with PKIX, or DANE when
	// published) would deliver over TLS to this address.
	VerdictOK Verdict = "ok"
	// VerdictTemporary: the answer is unknown (the port is unreachable, a
	// timeout, a 4xx greeting, a DNS failure). Many clouds block outbound
	// port 25, so this is never reported as a change.
	VerdictTemporary Verdict = "temporary"
	// VerdictTLSFailing: the server speaks SMTP but a verifying sender
	// would refuse it: no STARTTLS, a failed handshake, an untrusted,
	// expired or misnamed certificate, or a DANE mismatch.
	VerdictTLSFailing Verdict = "tls_failing"
	// VerdictSMTPFailing: the server refuses to talk SMTP at all (a 5xx
	// greeting or EHLO, a malformed or endless reply), or the MX host has
	// no address.
	VerdictSMTPFailing Verdict = "smtp_failing"
)

// Kind classifies a Problem by its effect on the verdict.
type Kind string

// Problem kinds.
const (
	// KindTemporary problems make the verdict Temporary unless a failing
	// problem was also seen.
	KindTemporary Kind = "temporary"
	// KindSMTP problems make the verdict SMTPFailing.
	KindSMTP Kind = "smtp"
	// KindTLS problems make the verdict TLSFailing.
	KindTLS Kind = "tls"
)

// Code names one kind of problem; it is stable and meant for storage, event
// payloads and the API.
type Code string

// Problem codes.
const (
	// Temporary.
	CodeConnectFailed    Code = "connect_failed"    // refused, unreachable, connect timeout
	CodeTimeout          Code = "timeout"           // a read or write took longer than the step timeout
	CodeConnectionClosed Code = "connection_closed" // the server hung up mid-conversation
	CodeGreetingDeferred Code = "greeting_deferred" // 4xx greeting (e.g. 421 too busy)
	CodeEHLODeferred     Code = "ehlo_deferred"     // 4xx reply to EHLO
	CodeDNSTemporary     Code = "dns_temporary"     // an address or TLSA lookup failed temporarily
	CodeNotAllowed       Code = "address_not_allowed"

	// SMTP failing.
	CodeNoAddress        Code = "no_address"        // the MX host has no A or AAAA record
	CodeGreetingRejected Code = "greeting_rejected" // 5xx greeting, e.g. 554
	CodeEHLORejected     Code = "ehlo_rejected"     // 5xx reply to EHLO
	CodeProtocolError    Code = "protocol_error"    // malformed, too long or endless replies

	// TLS failing.
	CodeStartTLSNotOffered     Code = "starttls_not_offered"
	CodeStartTLSRefused        Code = "starttls_refused"
	CodeHandshakeFailed        Code = "handshake_failed"
	CodeCertificateUntrusted   Code = "certificate_untrusted"
	CodeCertificateSelfSigned  Code = "certificate_self_signed"
	CodeCertificateExpired     Code = "certificate_expired"
	CodeCertificateNotYetValid Code = "certificate_not_yet_valid"
	CodeNameMismatch           Code = "name_mismatch"   // certificate not valid for the MX host name
	CodePolicyMismatch         Code = "policy_mismatch" // MX host matches none of the MTA-STS mx patterns
	CodeDANEMismatch           Code = "dane_mismatch"   // DANE published, no usable TLSA record matches
)

// Problem is one thing wrong with an address or host.
type Problem struct {
	Code Code `json:"code"`
	Kind Kind `json:"kind"`
	// Detail is human-readable: the server's reply text, the x509 error.
	Detail string `json:"detail,omitempty"`
}

// HostResult is the outcome of probing one MX host.
type HostResult struct {
	// Host is the MX host name, lower case, without trailing dot.
	Host string `json:"host"`
	// Port is the TCP port probed.
	Port int `json:"port"`
	// Verdict is the worst conclusive verdict of the addresses (any
	// SMTPFailing, else any TLSFailing), else Temporary if any address or
	// lookup was inconclusive, else OK.
	Verdict Verdict `json:"verdict"`
	// Problems are the host-level problems (address lookup, TLSA lookup,
	// MTA-STS pattern) followed by every address's problems, one per code.
	Problems []Problem `json:"problems"`
	// MatchesPolicy reports whether Host matches one of the MTA-STS mx
	// patterns given to Probe; nil when none were given.
	MatchesPolicy *bool `json:"matches_policy,omitempty"`
	// TLSA is the DANE lookup, shared by the addresses.
	TLSA TLSALookup `json:"tlsa"`
	// Addresses are the per-address results, in resolver order.
	Addresses []AddrResult `json:"addresses"`
	// Truncated is set when the host had more than MaxAddresses addresses
	// and only the first were probed.
	Truncated bool `json:"truncated,omitempty"`
}

// AddrResult is the outcome of probing one address of an MX host.
type AddrResult struct {
	Addr    netip.Addr `json:"addr"`
	Verdict Verdict    `json:"verdict"`
	// Problems count toward Verdict.
	Problems []Problem `json:"problems"`
	// Notes are problems observed that do not count toward Verdict: the
	// PKIX findings (name, expiry, trust) when a DANE record matched, since
	// DANE senders skip them (RFC 7672 section 3.1.1). They still matter to
	// MTA-STS senders, which SafeToEnforce checks.
	Notes []Problem `json:"notes,omitempty"`
	// Banner is the first line of the server's greeting (bounded, control
	// characters replaced).
	Banner string `json:"banner,omitempty"`
	// StartTLS reports whether EHLO advertised STARTTLS.
	StartTLS bool `json:"starttls"`
	// TLS is set when the handshake completed.
	TLS *TLSInfo `json:"tls,omitempty"`
	// DANE is the TLSA matching against this address's certificate chain;
	// nil when no TLSA records were published under a validated answer.
	DANE *DANEResult `json:"dane,omitempty"`
	// ReverseDNS is the forward-confirmed reverse DNS of Addr.
	ReverseDNS ReverseDNS `json:"reverse_dns"`
	// Duration is how long the SMTP conversation took (informational).
	Duration time.Duration `json:"duration_ns"`
}

// TLSInfo describes a completed TLS handshake and the certificate presented.
type TLSInfo struct {
	// Version is e.g. "TLS 1.3" (tls.VersionName).
	Version string `json:"version"`
	// CipherSuite is e.g. "TLS_AES_128_GCM_SHA256" (tls.CipherSuiteName).
	CipherSuite string `json:"cipher_suite"`
	// Chain is the presented certificate chain, leaf first.
	Chain []CertInfo `json:"chain"`
	// Verified reports whether the chain verifies at Now against the system
	// roots or Config.ExtraRoots (PKIX, what MTA-STS senders require).
	Verified bool `json:"verified"`
	// VerifyError is the x509 error when Verified is false.
	VerifyError string `json:"verify_error,omitempty"`
	// NameMatches reports whether the leaf certificate is valid for the MX
	// host name (RFC 6125 rules, as crypto/x509 applies them).
	NameMatches bool `json:"name_matches"`
	// NotAfter is the leaf certificate's expiry.
	NotAfter time.Time `json:"not_after"`
	// DaysLeft is the number of whole days from Now to NotAfter, rounded
	// down: negative once expired.
	DaysLeft int `json:"days_left"`
	// Fingerprint is the SHA-256 of the leaf certificate (DER), lower-case
	// hex: the identity of "this certificate" for expiry notices.
	Fingerprint string `json:"fingerprint"`
}

// CertInfo describes one certificate of a chain.
type CertInfo struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	Fingerprint string    `json:"fingerprint"`
}

// add appends a problem unless one with the same code is already there.
func addProblem(list []Problem, p Problem) []Problem {
	if slices.ContainsFunc(list, func(q Problem) bool { return q.Code == p.Code }) {
		return list
	}
	return append(list, p)
}

// verdictOf folds problems into a verdict: failing problems win over
// temporary ones, since a failure that was observed is a fact.
func verdictOf(problems []Problem) Verdict {
	var smtp, tlsFail, temp bool
	for _, p := range problems {
		switch p.Kind {
		case KindSMTP:
			smtp = true
		case KindTLS:
			tlsFail = true
		case KindTemporary:
			temp = true
		}
	}
	switch {
	case smtp:
		return VerdictSMTPFailing
	case tlsFail:
		return VerdictTLSFailing
	case temp:
		return VerdictTemporary
	}
	return VerdictOK
}

// Failing reports whether v is a conclusive failure.
func (v Verdict) Failing() bool {
	return v == VerdictTLSFailing || v == VerdictSMTPFailing
}
