// Package blocklist looks up IP addresses and domain names on DNS blocklists
// (DNSBLs, RFC 5782) and reads what each answer means.
//
// # What it provides
//
//   - Catalog: a small, curated set of well-known lists with the meaning of
//     each return code, whether a list (or a code, such as Spamhaus PBL) is
//     informational only, its delisting page, its usage policy and the
//     answers it uses for errors. BLOCKLIST_ZONES (ParseZones) replaces the
//     catalog; a zone the catalog knows keeps its metadata.
//   - IPQueryName and DomainQueryName: the names RFC 5782 defines (reversed
//     IPv4 octets, reversed IPv6 nibbles, domain names under the zone).
//   - Lookup, LookupIP and LookupDomain: one lookup, with a typed Result.
//   - Health: the RFC 5782 section 5 test of a list before trusting it.
//   - IsPublicResolver: the start-up warning about resolvers lists refuse.
//   - Limiter: a per-list query rate for the callers that fan lookups out.
//
// Scheduling, sharing lookups across tenants, caching and storage belong to
// the callers; this package keeps no state besides the Limiter's.
//
// # Reading an answer
//
// An answer is read in one of four ways, and only one of them is a listing:
//
//   - NXDOMAIN or NODATA: NotListed.
//   - A records in the list's listing range (127.0.0.0/24 by default,
//     127.0.1.0/24 for Spamhaus DBL), none of them an error: Listed, each
//     with the catalog's meaning (an undocumented code is still a listing,
//     said to be undocumented). The TXT record of the same name is fetched
//     as the reason; if that lookup fails the listing stands without one.
//   - Any record in 127.255.255.0/24, in the list's ErrorCodes (Spamhaus's
//     127.255.255.252/.254/.255, DBL's 127.0.1.255 for an IP queried as a
//     domain), outside 127.0.0.0/8 (a resolver rewriting NXDOMAIN to an
//     advertising server, a lapsed zone parked with a wildcard), or in
//     127.0.0.0/8 but outside the listing range: ListError. One such record
//     spoils the whole answer: a list saying it refused the query has not
//     listed anything.
//   - No answer (timeout, SERVFAIL, REFUSED, network error): Temporary.
//     Callers change no state on it, exactly as for ListError.
//
// The answer's TTL (the smallest of its A records) is returned for caching;
// a NotListed answer has none, because the resolver does not hand back the
// SOA record that carries the negative TTL, so callers use their interval.
//
// A list is checked with Health before its lookups are trusted: 127.0.0.2
// (or a domain list's test name) must be listed and 127.0.0.1 ("invalid")
// must not. A list that answers its test entries with error codes, which is
// what Spamhaus does for every query arriving through a public resolver, is
// unhealthy with a reason that says so; a health check without an answer is
// HealthUnknown, and callers keep the previous verdict.
//
// # Why not mox's dnsbl package
//
// The mox module already required by mailwatch ships a dnsbl package. It is
// not used, for four reasons: it reports any A record as a listing without
// saying which code came back, so it cannot tell SBL from PBL, and it
// reports Spamhaus's 127.255.255.254 "public resolver" refusal as a listing
// of every address (the very false alarm this package must avoid); it does
// not query domain lists; it does not return the answer's TTL; and it takes
// mox's own resolver type, not dnscheck.Resolver, which mailwatch's tests
// and DNS_RESOLVER setting are built around. The lookup itself is a few
// lines on top of dnscheck.Resolver.Query, which already classifies NXDOMAIN,
// NODATA, SERVFAIL and timeouts.
//
// # The catalog
//
// The codes, delisting pages and policies are those the list operators
// publish, as known when the catalog was written; they change rarely but do
// change, so an operator who sees undocumented codes can pin the lists in
// BLOCKLIST_ZONES. IPv6 is queried the RFC 5782 way for every IP list; lists
// that hold no IPv6 data simply answer NXDOMAIN. The health check tests the
// IPv4 entries only, which every list in the catalog serves.
package blocklist
