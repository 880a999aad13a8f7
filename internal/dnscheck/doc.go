// Package dnscheck checks the email DNS posture of a domain: SPF (RFC 7208),
// DMARC (RFC 7489 and DMARCbis), DKIM keys (RFC 6376, RFC 8301, RFC 8463), MX
// (RFC 5321 section 5.1, RFC 7505), MTA-STS (RFC 8461), TLS-RPT (RFC 8460),
// BIMI (draft-brand-indicators-for-message-identification) and DNSSEC (the
// AD bit, RFC 4035 section 3.2.3).
//
// Every check returns a Result with the same shape (status, records, errors,
// warnings, instructions) plus check-specific detail. CheckAll runs all
// checks concurrently, each within a time budget, against one Resolver.
//
// # Status vocabulary
//
// A status uses the word an RFC defines where one exists (RFC 7208 section
// 2.6, RFC 8601 section 2.7):
//
//   - pass: published, valid, and nothing to fix.
//   - warn: published and usable, but with warnings that weaken protection
//     or deliverability (p=none, ?all, 1024-bit DKIM key, MTA-STS in
//     testing mode...). Not an RFC word; it is pass with caveats.
//   - fail: published but wrong in a way that breaks or defeats it: MX hosts
//     that do not resolve, an MTA-STS policy that cannot be fetched or does
//     not cover the MX hosts, only revoked or too-short DKIM keys.
//   - none: nothing is published (RFC 7208 "none", RFC 7489 "no policy").
//   - neutral: nothing to judge either way: no DKIM key found at the
//     selectors tried (the domain may sign with a selector we do not know),
//     or a null MX (RFC 7505) declaring that the domain receives no mail.
//   - temperror: the answer is unknown: a DNS timeout, SERVFAIL, a policy
//     fetch that timed out, or the check's time budget ran out. Never
//     reported as missing; change detection ignores it.
//   - permerror: published but unusable as written: a syntax error,
//     several records where one is required, SPF over its lookup limits.
//
// Severity, from good to bad: pass, neutral, warn, none, temperror (unknown),
// fail, permerror. See Compare for what counts as a change.
package dnscheck
