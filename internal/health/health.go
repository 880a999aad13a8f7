// Package health computes a domain's health score (0 to 100) from its DNS
// posture (the results of package dnscheck), capped by live signals.
//
// # Formula
//
// The score is the sum of the points of eight components, each worth at
// most its weight (the weights add up to 100):
//
//	component  weight  why
//	dmarc      25      The policy is what stops spoofing of the domain, and the
//	                   reports are how the owner sees abuse. Points by policy:
//	                   reject 25, quarantine 20, none 10; 5 fewer when the
//	                   record has warnings (no rua, pct < 100, t=y...).
//	spf        20      Mailbox providers require SPF (or DKIM) and DMARC needs
//	                   one aligned pass. pass 20; warnings 12 (?all, no all,
//	                   near the lookup limit); +all earns 0 because it
//	                   authorises everyone; none or permerror 0.
//	dkim       20      DKIM survives forwarding and is the stronger DMARC
//	                   identifier. pass 20; warn 14 (1024-bit key, testing);
//	                   neutral 10 (no key at the selectors we know: the
//	                   domain may sign with another); fail or permerror 0.
//	mx         10      Without working MX the domain cannot receive bounces,
//	                   replies or DMARC reports. pass 10, warn 6, neutral
//	                   (null MX: a deliberate choice) 10, others 0.
//	dnssec     10      Protects every other record from forgery in transit.
//	                   pass 10, warn 5, none 0.
//	mta_sts    8       Forces TLS for inbound mail. pass 8, warn 5 (testing
//	                   mode), none 0, fail 0 (a broken policy can block mail).
//	tls_rpt    5       Makes TLS delivery failures visible. pass 5, none 0.
//	bimi       2       Brand display only; nice to have. pass 2, warn 1.
//
// Statuses not listed earn 0. A component whose check ended in temperror
// is left out and the score is rescaled over the remaining weights, so a
// passing DNS failure neither lowers nor raises the score; Report.Unknown
// lists those components. If every check is temperror, the score is 0 and
// Report.Complete is false; callers should not emit events from it.
//
// A domain that does not exist in DNS (dnscheck.Results.NXDomain: its name
// answered NXDOMAIN) scores 0 with every component saying so, rather than
// the points a real domain that publishes nothing would get (10, for a DKIM
// key that may sit at a selector we do not know): it cannot send
// authenticated mail or receive any, and a domain that vanishes should fall
// (a critical health_score_changed), not keep a score.
//
// # Caps
//
// Live signals cannot raise the score but can cap it: a domain with perfect
// DNS whose mail fails DMARC or bounces is not healthy. Score applies the
// lowest of the caps given; DMARCPassRateCap, BounceRateCap and
// ComplaintRateCap build them from rates with documented thresholds.
package health

import (
	"fmt"
	"math"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// Thresholds for events (issue 6): a change of at least ChangeThreshold
// points is reported; a fall below CriticalScore or by at least
// CriticalDrop points is critical.
const (
	ChangeThreshold = 5
	CriticalScore   = 50
	CriticalDrop    = 20
)

// Component is one term of the score.
type Component struct {
	Name   string  `json:"name"`
	Weight int     `json:"weight"`
	Points float64 `json:"points"`
	Reason string  `json:"reason"`
}

// Cap limits the score because of a live signal.
type Cap struct {
	// Name identifies the signal, e.g. "dmarc_pass_rate".
	Name string `json:"name"`
	// Max is the highest score allowed.
	Max int `json:"max"`
	// Reason explains the cap to the user.
	Reason string `json:"reason"`
}

// Report is a computed score with its breakdown.
type Report struct {
	Score      int         `json:"score"`
	Components []Component `json:"components"`
	// Unknown lists components left out because their check was temperror.
	Unknown []string `json:"unknown"`
	// Complete is false when no component could be judged.
	Complete bool `json:"complete"`
	// Uncapped is the DNS score before caps.
	Uncapped int `json:"uncapped"`
	// NXDomain is true when the domain does not exist in DNS; the score is
	// then 0.
	NXDomain bool `json:"nxdomain"`
	// Caps are the caps given; Applied is the one that lowered the score.
	Caps    []Cap `json:"caps"`
	Applied *Cap  `json:"applied,omitempty"`
}

// weights in display order.
func weights() []Component {
	return []Component{
		{Name: dnscheck.NameDMARC, Weight: 25},
		{Name: dnscheck.NameSPF, Weight: 20},
		{Name: dnscheck.NameDKIM, Weight: 20},
		{Name: dnscheck.NameMX, Weight: 10},
		{Name: dnscheck.NameDNSSEC, Weight: 10},
		{Name: dnscheck.NameMTASTS, Weight: 8},
		{Name: dnscheck.NameTLSRPT, Weight: 5},
		{Name: dnscheck.NameBIMI, Weight: 2},
	}
}

// Score computes the health score of results, capped by caps.
func Score(results *dnscheck.Results, caps ...Cap) Report {
	rep := Report{Components: []Component{}, Unknown: []string{}, Caps: append([]Cap{}, caps...)}
	if results.NXDomain {
		rep.NXDomain, rep.Complete = true, true
		for _, c := range weights() {
			c.Reason = "the domain does not exist in DNS (NXDOMAIN)"
			rep.Components = append(rep.Components, c)
		}
		return rep
	}
	statuses := results.Map()
	total, weightSum := 0.0, 0
	for _, c := range weights() {
		r, ok := statuses[c.Name]
		if !ok || r.Status == dnscheck.StatusTemperror {
			c.Reason = "could not be checked (temporary DNS failure); left out of the score"
			rep.Unknown = append(rep.Unknown, c.Name)
			rep.Components = append(rep.Components, c)
			continue
		}
		c.Points, c.Reason = points(c, r.Status, results)
		total += c.Points
		weightSum += c.Weight
		rep.Components = append(rep.Components, c)
	}
	if weightSum == 0 {
		return rep
	}
	rep.Complete = true
	rep.Uncapped = int(math.Round(total * 100 / float64(weightSum)))
	rep.Score = rep.Uncapped
	for i, cp := range caps {
		if cp.Max < rep.Score {
			rep.Score = cp.Max
			rep.Applied = &caps[i]
		}
	}
	return rep
}

// points returns the points and reason of one component.
func points(c Component, status string, rs *dnscheck.Results) (float64, string) {
	w := float64(c.Weight)
	switch c.Name {
	case dnscheck.NameDMARC:
		if status != dnscheck.StatusPass && status != dnscheck.StatusWarn {
			return 0, "no usable DMARC record: nothing stops spoofing of the domain"
		}
		var p float64
		var reason string
		switch rs.DMARC.Policy {
		case "reject":
			p, reason = 25, "p=reject: spoofed mail is rejected"
		case "quarantine":
			p, reason = 20, "p=quarantine: spoofed mail goes to spam; reject is stronger"
		default:
			p, reason = 10, "p=none: monitoring only, spoofed mail is delivered"
		}
		if status == dnscheck.StatusWarn && p > 10 {
			p -= 5
			reason += "; the record has warnings"
		}
		return p, reason
	case dnscheck.NameSPF:
		if rs.SPF != nil && rs.SPF.Default == "pass" && (status == dnscheck.StatusPass || status == dnscheck.StatusWarn) {
			return 0, "+all authorises every server on the internet"
		}
	}
	type rule struct {
		frac   float64
		reason string
	}
	table := map[string]map[string]rule{
		dnscheck.NameSPF: {
			dnscheck.StatusPass: {1, "valid SPF record within the lookup limits"},
			dnscheck.StatusWarn: {0.6, "SPF record works but has warnings"},
		},
		dnscheck.NameDKIM: {
			dnscheck.StatusPass:    {1, "a strong DKIM key is published"},
			dnscheck.StatusWarn:    {0.7, "DKIM key published with warnings (short key, testing)"},
			dnscheck.StatusNeutral: {0.5, "no DKIM key found at the selectors known; configure the selector"},
		},
		dnscheck.NameMX: {
			dnscheck.StatusPass:    {1, "MX hosts resolve"},
			dnscheck.StatusWarn:    {0.6, "some MX hosts are broken or aliases"},
			dnscheck.StatusNeutral: {1, "null MX: the domain deliberately receives no mail"},
		},
		dnscheck.NameDNSSEC: {
			dnscheck.StatusPass: {1, "DNSSEC validated"},
			dnscheck.StatusWarn: {0.5, "DS records present but not validated by the resolver"},
		},
		dnscheck.NameMTASTS: {
			dnscheck.StatusPass: {1, "MTA-STS enforces TLS"},
			dnscheck.StatusWarn: {0.625, "MTA-STS published in testing mode or with warnings"},
		},
		dnscheck.NameTLSRPT: {
			dnscheck.StatusPass: {1, "TLS-RPT reports are requested"},
		},
		dnscheck.NameBIMI: {
			dnscheck.StatusPass: {1, "BIMI record published"},
			dnscheck.StatusWarn: {0.5, "BIMI record published with warnings"},
		},
	}
	if r, ok := table[c.Name][status]; ok {
		return w * r.frac, r.reason
	}
	return 0, c.Name + " is " + status
}

// Change is the decision about a new score compared with the previous one.
type Change struct {
	Previous int `json:"previous"`
	Current  int `json:"current"`
	Delta    int `json:"delta"`
	// Emit is true when health_score_changed should be emitted: the score
	// moved by ChangeThreshold points or more.
	Emit bool `json:"emit"`
	// Critical is true for a fall that ends below CriticalScore or loses
	// CriticalDrop points or more. Rises are never critical.
	Critical bool `json:"critical"`
}

// Compare decides whether moving from previous to current is an event and
// whether it is critical. The first score of a domain has no previous one:
// pass hasPrevious false and no event is emitted.
func Compare(previous, current int, hasPrevious bool) Change {
	c := Change{Previous: previous, Current: current, Delta: current - previous}
	if !hasPrevious {
		c.Previous, c.Delta = current, 0
		return c
	}
	c.Emit = abs(c.Delta) >= ChangeThreshold
	c.Critical = c.Emit && c.Delta < 0 && (current < CriticalScore || -c.Delta >= CriticalDrop)
	return c
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Minimum message counts before a rate is trusted enough to cap the score.
const (
	minDMARCMessages = 100
	minSentMessages  = 500
)

// DMARCPassRateCap caps the score when too little of the domain's mail
// passes DMARC (from aggregate reports): below 98% caps at 85, below 90% at
// 70, below 75% at 50. rate is 0..1; messages is the volume it is computed
// over. ok is false when no cap applies.
func DMARCPassRateCap(rate float64, messages int) (Cap, bool) {
	if messages < minDMARCMessages {
		return Cap{}, false
	}
	const reason = "only %.1f%% of the mail seen in DMARC reports passes DMARC"
	switch {
	case rate < 0.75:
		return Cap{Name: "dmarc_pass_rate", Max: 50, Reason: sprintfPct(reason, rate)}, true
	case rate < 0.90:
		return Cap{Name: "dmarc_pass_rate", Max: 70, Reason: sprintfPct(reason, rate)}, true
	case rate < 0.98:
		return Cap{Name: "dmarc_pass_rate", Max: 85, Reason: sprintfPct(reason, rate)}, true
	}
	return Cap{}, false
}

// BounceRateCap caps the score when too much mail bounces: above 2% caps at
// 80, above 5% at 60, above 10% at 40 (mailbox providers start throttling
// around 2% and block senders near 10%).
func BounceRateCap(rate float64, sent int) (Cap, bool) {
	if sent < minSentMessages {
		return Cap{}, false
	}
	const reason = "%.1f%% of sent mail bounces"
	switch {
	case rate > 0.10:
		return Cap{Name: "bounce_rate", Max: 40, Reason: sprintfPct(reason, rate)}, true
	case rate > 0.05:
		return Cap{Name: "bounce_rate", Max: 60, Reason: sprintfPct(reason, rate)}, true
	case rate > 0.02:
		return Cap{Name: "bounce_rate", Max: 80, Reason: sprintfPct(reason, rate)}, true
	}
	return Cap{}, false
}

// ComplaintRateCap caps the score when recipients mark mail as spam: above
// 0.1% caps at 75, above 0.3% at 45 (Gmail and Yahoo require bulk senders to
// stay under 0.3% and recommend under 0.1%).
func ComplaintRateCap(rate float64, sent int) (Cap, bool) {
	if sent < minSentMessages {
		return Cap{}, false
	}
	const reason = "%.2f%% of sent mail is reported as spam"
	switch {
	case rate > 0.003:
		return Cap{Name: "complaint_rate", Max: 45, Reason: sprintfPct(reason, rate)}, true
	case rate > 0.001:
		return Cap{Name: "complaint_rate", Max: 75, Reason: sprintfPct(reason, rate)}, true
	}
	return Cap{}, false
}

// BlocklistCap caps the score when IPs that carry the domain's mail are on
// DNS blocklists (informational listings such as Spamhaus PBL excluded):
// share is the part of the last 7 days of mail they carried. At least 50%
// caps at 40, at least 10% at 60, any listed share at 80: receivers that
// consult the lists refuse or junk what those IPs send.
func BlocklistCap(share float64) (Cap, bool) {
	const reason = "IPs carrying %.0f%% of the mail are on DNS blocklists"
	switch {
	case share >= 0.5:
		return Cap{Name: "blocklist", Max: 40, Reason: sprintfPct(reason, share)}, true
	case share >= 0.1:
		return Cap{Name: "blocklist", Max: 60, Reason: sprintfPct(reason, share)}, true
	case share > 0:
		return Cap{Name: "blocklist", Max: 80, Reason: sprintfPct(reason, share)}, true
	}
	return Cap{}, false
}

func sprintfPct(format string, rate float64) string {
	return fmt.Sprintf(format, rate*100)
}

// TransportCap caps the score at 40 while failingHosts MX hosts fail their
// transport probe although senders verify them (MTA-STS mode enforce, or
// DANE published): those senders queue the mail instead of delivering it.
func TransportCap(failingHosts int) (Cap, bool) {
	if failingHosts <= 0 {
		return Cap{}, false
	}
	return Cap{Name: "mx_transport", Max: 40, Reason: fmt.Sprintf(
		"%d MX host(s) fail TLS while MTA-STS enforce or DANE makes senders verify it: their mail is queued, not delivered", failingHosts)}, true
}
