package blocklist

import (
	"net/netip"
	"slices"
	"strings"
)

// Kind says what a list contains and so how it is queried.
type Kind string

const (
	// KindIP lists IPv4 (and possibly IPv6) addresses, queried by reversed
	// octets or nibbles (RFC 5782 sections 2.1 and 2.4).
	KindIP Kind = "ip"
	// KindDomain lists domain names, queried by the name itself under the
	// zone (RFC 5782 section 2.2).
	KindDomain Kind = "domain"
)

// Code is one documented answer of a list and what it means.
type Code struct {
	// Addr is the A record the list answers with, e.g. 127.0.0.2.
	Addr netip.Addr
	// Name is the short name of the sub-list, e.g. "SBL" or "PBL".
	Name string
	// Meaning says in a sentence why an address or domain gets this code.
	Meaning string
	// Informational marks a code that is a policy statement rather than a
	// sign of abuse (Spamhaus PBL: "this address should not send mail
	// directly"); it is reported but does not raise an alert.
	Informational bool
}

// List is one DNS blocklist: where to query it and how to read its answers.
type List struct {
	// Name is a human name, e.g. "Spamhaus ZEN"; for a list not in the
	// catalog it is the zone.
	Name string
	// Zone is the DNS zone queried, lower case without trailing dot.
	Zone string
	// Kind says whether the list holds addresses or domain names.
	Kind Kind
	// Codes are the documented answers. Empty for a list not in the catalog.
	Codes []Code
	// Listed is the range of answers that mean "listed". An answer in it
	// that is not in Codes is still a listing, of an undocumented code.
	Listed netip.Prefix
	// ErrorCodes are answers in Listed (or elsewhere in 127.0.0.0/8) that
	// the list uses to say it refuses or cannot answer the query. Every
	// answer in 127.255.255.0/24 is an error as well, for every list.
	ErrorCodes []netip.Addr
	// Informational marks a whole list as reported but never alerted on.
	Informational bool
	// DelistURL is the page where the owner of a listed address or domain
	// asks for removal; empty when the list has none.
	DelistURL string
	// UsagePolicy summarises the list's terms of use for the operator.
	UsagePolicy string
	// TestName is the entry that must be listed for a healthy domain list;
	// empty means "test" (RFC 5782 section 5). Unused for IP lists, which
	// are tested with 127.0.0.2.
	TestName string
	// keyedSuffix, when set, makes a zone "<key>" + keyedSuffix (a
	// subscriber's private zone, e.g. Spamhaus's Data Query Service) take
	// this entry's metadata.
	keyedSuffix string
}

// ipv4Listed is the answer range RFC 5782 section 2.3 describes and most IP
// lists use.
var ipv4Listed = netip.MustParsePrefix("127.0.0.0/24")

// errorRange holds the answers RFC 5782 leaves free and lists have settled
// on for errors (Spamhaus's 127.255.255.252 to .255 among them); mailwatch
// treats every answer in it as an error for every list.
var errorRange = netip.MustParsePrefix("127.255.255.0/24")

// loopback is 127.0.0.0/8: a DNSBL answer outside it is never a listing.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// spamhausErrors are the answers Spamhaus documents for queries it does not
// serve: .252 a typing error in the zone name, .254 a query through a public
// or open resolver (or otherwise unattributable), .255 too many queries.
var spamhausErrors = []netip.Addr{addr("127.255.255.252"), addr("127.255.255.254"), addr("127.255.255.255")}

const spamhausPolicy = "Free only for low-volume, non-commercial use (see spamhaus.org's DNSBL usage terms); " +
	"queries through public resolvers (Google, Cloudflare, Quad9, OpenDNS...) are refused with 127.255.255.254. " +
	"Commercial users subscribe to the Data Query Service and set BLOCKLIST_ZONES to their key's zone."

// Catalog returns the lists mailwatch checks when BLOCKLIST_ZONES is not
// set, as a fresh slice the caller may change.
//
// The set is deliberately small: well-known lists that large receivers are
// known to consult, whose return codes are publicly documented, and that
// are free for modest query volumes. The codes below are those the list
// operators publish; they change rarely, but an operator can always replace
// the catalog with BLOCKLIST_ZONES. Left out on purpose: SORBS (shut down by
// its owner in 2024), UCEPROTECT levels 2 and 3 (they list whole networks
// and providers for the behaviour of neighbours), and the URI lists SURBL
// and URIBL (their answers are bit masks and they grade links in message
// bodies, not senders).
func Catalog() []List {
	return append(spamhausLists(), otherLists()...)
}

// spamhausLists are Spamhaus's combined IP list and its domain list.
func spamhausLists() []List {
	return []List{
		{
			Name: "Spamhaus ZEN",
			Zone: "zen.spamhaus.org",
			Kind: KindIP,
			Codes: []Code{
				{Addr: addr("127.0.0.2"), Name: "SBL", Meaning: "Spamhaus Block List: a direct spam source or spam operation verified by Spamhaus."},
				{Addr: addr("127.0.0.3"), Name: "CSS", Meaning: "Spamhaus CSS: the address sent low-reputation or snowshoe mail, detected automatically."},
				{Addr: addr("127.0.0.4"), Name: "XBL", Meaning: "Exploits Block List: the address shows signs of compromise (malware, open proxy, bot)."},
				{Addr: addr("127.0.0.5"), Name: "XBL", Meaning: "Exploits Block List: the address shows signs of compromise (malware, open proxy, bot)."},
				{Addr: addr("127.0.0.6"), Name: "XBL", Meaning: "Exploits Block List: the address shows signs of compromise (malware, open proxy, bot)."},
				{Addr: addr("127.0.0.7"), Name: "XBL", Meaning: "Exploits Block List: the address shows signs of compromise (malware, open proxy, bot)."},
				{Addr: addr("127.0.0.9"), Name: "DROP", Meaning: "Don't Route Or Peer: the address is in a network hijacked or run by criminals."},
				{Addr: addr("127.0.0.10"), Name: "PBL", Informational: true, Meaning: "Policy Block List, set by the network's ISP: the address is not meant to send mail directly to other servers (e.g. a dynamic or end-user range)."},
				{Addr: addr("127.0.0.11"), Name: "PBL", Informational: true, Meaning: "Policy Block List, set by Spamhaus: the address is not meant to send mail directly to other servers (e.g. a dynamic or end-user range)."},
			},
			Listed:      ipv4Listed,
			ErrorCodes:  spamhausErrors,
			DelistURL:   "https://check.spamhaus.org/",
			UsagePolicy: spamhausPolicy,
			keyedSuffix: ".zen.dq.spamhaus.net",
		},
		{
			Name: "Spamhaus DBL",
			Zone: "dbl.spamhaus.org",
			Kind: KindDomain,
			Codes: []Code{
				{Addr: addr("127.0.1.2"), Name: "DBL spam", Meaning: "The domain is used in spam."},
				{Addr: addr("127.0.1.4"), Name: "DBL phish", Meaning: "The domain is used for phishing."},
				{Addr: addr("127.0.1.5"), Name: "DBL malware", Meaning: "The domain serves or controls malware."},
				{Addr: addr("127.0.1.6"), Name: "DBL botnet C&C", Meaning: "The domain is a botnet command and control server."},
				{Addr: addr("127.0.1.102"), Name: "DBL abused legit spam", Meaning: "A legitimate domain that has been abused (e.g. compromised) to serve spam."},
				{Addr: addr("127.0.1.103"), Name: "DBL abused spammed redirector", Meaning: "A legitimate domain whose redirector or URL shortener is abused by spammers."},
				{Addr: addr("127.0.1.104"), Name: "DBL abused legit phish", Meaning: "A legitimate domain that has been abused to host phishing."},
				{Addr: addr("127.0.1.105"), Name: "DBL abused legit malware", Meaning: "A legitimate domain that has been abused to serve malware."},
				{Addr: addr("127.0.1.106"), Name: "DBL abused legit botnet C&C", Meaning: "A legitimate domain that has been abused to host a botnet command and control server."},
			},
			Listed: netip.MustParsePrefix("127.0.1.0/24"),
			// 127.0.1.255: the DBL was queried with an IP address, which it
			// refuses.
			ErrorCodes:  append([]netip.Addr{addr("127.0.1.255")}, spamhausErrors...),
			DelistURL:   "https://check.spamhaus.org/",
			UsagePolicy: spamhausPolicy,
			// Spamhaus documents dbltest.com as the DBL's permanent test entry.
			TestName:    "dbltest.com",
			keyedSuffix: ".dbl.dq.spamhaus.net",
		},
	}
}

// otherLists are the catalog's IP lists besides Spamhaus ZEN.
func otherLists() []List {
	return []List{
		{
			Name: "SpamCop",
			Zone: "bl.spamcop.net",
			Kind: KindIP,
			Codes: []Code{
				{Addr: addr("127.0.0.2"), Name: "SCBL", Meaning: "SpamCop users reported mail from the address, or it hit SpamCop's spam traps; entries expire on their own once reports stop."},
			},
			Listed:      ipv4Listed,
			DelistURL:   "https://www.spamcop.net/bl.shtml",
			UsagePolicy: "Free; listings expire automatically about a day after the last report.",
		},
		{
			Name: "Barracuda",
			Zone: "b.barracudacentral.org",
			Kind: KindIP,
			Codes: []Code{
				{Addr: addr("127.0.0.2"), Name: "BRBL", Meaning: "Barracuda Reputation Block List: the address sent mail Barracuda judged to be spam."},
			},
			Listed:      ipv4Listed,
			DelistURL:   "https://www.barracudacentral.org/rbl/removal-request",
			UsagePolicy: "Free, but Barracuda asks that the resolver's address be registered at barracudacentral.org before it is used.",
		},
		{
			Name: "PSBL",
			Zone: "psbl.surriel.com",
			Kind: KindIP,
			Codes: []Code{
				{Addr: addr("127.0.0.2"), Name: "PSBL", Meaning: "Passive Spam Block List: the address sent mail to spam traps and is not a known legitimate mail server."},
			},
			Listed:      ipv4Listed,
			DelistURL:   "https://psbl.org/",
			UsagePolicy: "Free; removal is self-service.",
		},
		{
			Name: "UCEPROTECT level 1",
			Zone: "dnsbl-1.uceprotect.net",
			Kind: KindIP,
			Codes: []Code{
				{Addr: addr("127.0.0.2"), Name: "UCEPROTECT-1", Meaning: "The single address sent mail to UCEPROTECT's spam traps; entries expire on their own after a period without new hits."},
			},
			Listed: ipv4Listed,
			// Informational in mailwatch: listings expire by themselves and the
			// list sells express delisting, so a listing is worth knowing but
			// not worth waking someone for.
			Informational: true,
			DelistURL:     "https://www.uceprotect.net/en/rblcheck.php",
			UsagePolicy:   "Free for modest query volumes; listings expire automatically, express delisting is paid.",
		},
	}
}

// catalogEntry returns the catalog's entry for zone, matched exactly or as a
// subscriber's keyed zone; the returned List carries zone as its Zone.
func catalogEntry(zone string) (List, bool) {
	for _, l := range Catalog() {
		if l.Zone == zone {
			return l, true
		}
		if l.keyedSuffix != "" {
			if key, ok := strings.CutSuffix(zone, l.keyedSuffix); ok && key != "" && !strings.Contains(key, ".") {
				l.Zone = zone
				return l, true
			}
		}
	}
	return List{}, false
}

// generic returns a list not in the catalog: any 127.0.0.x answer is a
// listing, and 127.255.255.x an error.
func generic(zone string, kind Kind) List {
	return List{Name: zone, Zone: zone, Kind: kind, Listed: ipv4Listed}
}

// code returns the catalog's meaning of an answer, if it has one.
func (l List) code(a netip.Addr) (Code, bool) {
	i := slices.IndexFunc(l.Codes, func(c Code) bool { return c.Addr == a })
	if i < 0 {
		return Code{}, false
	}
	return l.Codes[i], true
}

// isError reports whether an answer means the list refused or failed the
// query.
func (l List) isError(a netip.Addr) bool {
	return errorRange.Contains(a) || slices.Contains(l.ErrorCodes, a)
}
