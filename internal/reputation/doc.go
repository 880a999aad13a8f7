// Package reputation watches the addresses and names that carry a domain's
// mail on DNS blocklists: what is watched, the lookups shared by every
// account, the listing state and its events. The DNSBL protocol (query
// names, reading answers, list health) is package blocklist's; api/, jobs/
// and web/ are adapters of this package.
//
// # What is watched
//
// Per domain (RefreshWatchSet), from its stored DMARC aggregate data: the
// source IPs of its compliant or forwarded mail over the last 14 days
// (WatchWindow), busiest first and at most MaxWatchedIPs, each with the
// share of the domain's last 7 days of mail it carried (ShareWindow; the
// denominator is all the domain's reported mail, failing mail included);
// and the domain name itself, for the domain lists. IPs that only sent
// failing mail are spoofers or misconfigured sources, not the domain's
// senders, and are not watched. Targets with origin "pinned" are kept
// across refreshes; no adapter creates them yet.
//
// # Shared lookups
//
// A (zone, target) answer is public, so blocklist_lookups caches it for
// every account: a pair is looked up at most once until its expiry, however
// many domains watch it. The expiry is the answer's TTL bounded to
// [MinCache, DefaultInterval] for a listing and DefaultInterval for "not
// listed" (whose negative TTL the resolver does not return). Concurrent
// checks of a pair are serialised by a transaction-scoped advisory lock on
// it, and the second reads the first one's answer. Only deciding answers
// are stored: a list error (an error code, a refusal) or no answer
// (timeout, SERVFAIL) changes no state, is not cached, and is asked again
// at the next check.
//
// # Health
//
// Each list's health (blocklist.Health) is checked before its lookups and
// the verdict kept by the Checker for HealthInterval; an unhealthy list is
// skipped, so that a list that lists everything, or refuses our resolver,
// raises no alarm. An unknown verdict keeps the previous one, and a list
// never judged healthy is skipped.
//
// # Events
//
// reputation_listings holds one row per domain, list and target. A listing
// (no row, or the previous one ended) and a delisting are written in the
// same transaction as their event, by statements that return a row only on
// a transition, so blocklist_listed and blocklist_delisted are emitted
// exactly once each, even by concurrent checks. blocklist_listed is
// critical when the domain's currently listed IPs carry at least
// CriticalShare (10%) of its mail, info for an informational listing
// (Spamhaus PBL, say: a policy statement, not abuse), warning otherwise.
// The same listed share caps the health score (health.BlocklistCap).
package reputation
