// Package mxprobe probes the SMTP transport of MX hosts the way a sending
// server sees it: for each address of a host it connects, reads the
// greeting, sends EHLO, upgrades with STARTTLS, checks the certificate
// presented (trust, name, expiry), sends EHLO again and QUIT. It never sends
// MAIL FROM or RCPT TO. Per host it also looks up the TLSA records for DANE
// (RFC 7672) and matches them against each address's chain, and per address
// it checks forward-confirmed reverse DNS.
//
// # Verdicts
//
// Each address and each host gets a Verdict. OK means a verifying sender
// (MTA-STS's PKIX, or DANE when it is published) would deliver over TLS.
// TLSFailing and SMTPFailing are conclusive failures with Problems that say
// why. Temporary means the probe could not tell: an unreachable port (many
// clouds block outbound port 25), a timeout, a 4xx greeting, a DNS failure.
// Callers must not change stored state on a Temporary result. A host is
// failing when any address is, else Temporary when any address or lookup
// was inconclusive, else OK.
//
// When a usable TLSA record matches, the PKIX findings (untrusted chain,
// name, expiry) move from Problems to Notes: DANE senders do not act on them
// (RFC 7672 section 3.1.1). MTA-STS senders do, which is why SafeToEnforce
// reads the TLS facts, not the verdict.
//
// # Why a hand-written SMTP dialogue
//
// The conversation is four commands, and both client libraries in go.mod
// were read for it. emersion/go-smtp's client caps a reply line at 2000
// bytes but not the number of lines of a multi-line reply (net/textproto
// reads continuation lines until the deadline), and it offers STARTTLS only
// through NewClientStartTLS/DialStartTLS, which send EHLO as "localhost"
// before Hello can set the configured name. mox's smtpclient does the
// dialogue well, but hard-codes 30-second read deadlines, also reads
// multi-line replies without a line count, and imports mox's dns package,
// whose init sets net.DefaultResolver.StrictErrors for the whole process
// (and with it every HTTP client mailwatch runs). So this package speaks
// the four commands itself over a bounded reader: replies are capped in
// line length, line count and total bytes, every step has a deadline, the
// address has an overall deadline, and a cancelled context stops it. The
// reply parser has a fuzz test.
//
// The TLS side uses crypto/tls with InsecureSkipVerify and verifies with
// crypto/x509 afterwards, at the injected clock (see inspectTLS): a probe
// must see the certificate that fails. DANE matching uses miekg/dns's
// CertificateToDANE for digests, and crypto/x509 to verify DANE-TA chains
// from the matched anchor. mox's dane package does the same matching but
// verifies at the real clock and through mox's DNS types.
//
// # Limits
//
// DANE counts a TLSA answer as published when it carries the AD bit; it does
// not also require the MX host's address records to be signed (RFC 7672
// section 2.2.2). TLS versions below 1.2 (crypto/tls's client minimum) fail
// the handshake and are reported as such. Address probes run at most four
// at a time per host, and at most Config.MaxAddresses addresses are probed.
package mxprobe
