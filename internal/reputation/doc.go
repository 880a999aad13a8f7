// Package reputation watches the addresses and names that carry a domain's
// mail on DNS blocklists: what is watched, the lookups shared by every
// account, the listing state and its events. The DNSBL protocol (query
// names, reading answers, list health) is package blocklist's; api/, jobs/
// and web/ are adapters of this package.
//
// # What is watched
//
// Per domain (RefreshWatchSet, in one transaction holding the domain's
// watch lock, which AddPin and DeletePin take too), from its stored DMARC
// aggregate data over the last 14 days (WatchWindow):
//
//   - the source IPs of its compliant or forwarded mail (origin "report");
//   - its known senders' IPs whose mail all failed DMARC (origin "sender"):
//     a source whose cached reverse DNS name names a service of the sender
//     map (reports.KnownSender, the reports' rule; category non_compliant).
//     Other IPs that only sent failing mail are spoofers or misconfigured
//     sources, not the domain's senders, and are not watched. Report and
//     sender IPs together are at most MaxWatchedIPs, busiest first;
//   - the addresses of the ranges pinned on the domain (origin "pinned"),
//     whether or not the reports name them; a pinned source counts once;
//   - the domain name itself, for the domain lists (origin "domain");
//   - the return-path and DKIM signing domains of its reports, for the
//     domain lists (origin "auth_domain"), read from the daily counters the
//     report parse keeps (dmarc_auth_domain_days), at most MaxAuthDomains,
//     busiest first, the domain itself left out.
//
// Each target has the share of the domain's last 7 days of mail it carried
// (ShareWindow; the denominator is all the domain's reported mail, failing
// mail included).
//
// # Pins
//
// A pin is at most MaxPinAddresses addresses (IPv4 /24 or longer, IPv6
// /120 or longer); a domain has at most MaxPins pins and
// MaxPinnedAddresses pinned addresses, none overlapping. Removing a pin
// drops its addresses unless the reports make them sources, and ends their
// current listings quietly: delisted_at is set without blocklist_delisted
// (the user stopped watching, nothing was delisted), the rows stay as
// history. Targets the reports stop naming are dropped too, their listing
// rows left as they are.
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
