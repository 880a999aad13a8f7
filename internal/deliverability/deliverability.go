// Package deliverability judges one received message as its receiving
// server: it knows the SMTP session (client IP, HELO name, MAIL FROM, TLS)
// and has the raw message, so its verdicts are the receiver's own rather
// than guesses read from headers.
//
// Analyze produces five sections of findings (authentication, reputation,
// headers, content), each finding with a one-line fix, and a grade from A to
// F computed from the published Weights table. It never touches a database
// or the network beyond DNS through the Resolver it is given, never fetches
// a link, and bounds everything it reads (see Limits).
package deliverability

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// Resolver is the DNS client the analysis uses: SPF, DKIM keys, DMARC and
// reverse DNS. *dnscheck.Client satisfies it.
type Resolver = dnscheck.Resolver

// Session is what the SMTP server knew when it accepted the message.
type Session struct {
	// ClientIP is the connecting client's address.
	ClientIP netip.Addr `json:"client_ip"`
	// Helo is the HELO or EHLO name.
	Helo string `json:"helo"`
	// MailFrom is the MAIL FROM address, empty for a bounce.
	MailFrom string `json:"mail_from"`
	// TLSVersion is e.g. "TLS 1.3", empty when the session was not encrypted.
	TLSVersion string `json:"tls_version,omitempty"`
	// TLSCipher is the cipher suite name, empty without TLS.
	TLSCipher string `json:"tls_cipher,omitempty"`
}

// Listing is one blocklist that lists an address.
type Listing struct {
	// List is the blocklist's zone, e.g. "zen.spamhaus.org".
	List string `json:"list"`
	// Detail is the list's return code or TXT explanation, if any.
	Detail string `json:"detail,omitempty"`
	// Informational marks a policy listing (Spamhaus PBL, say: an address
	// range that should not send mail directly) rather than one for abuse.
	Informational bool `json:"informational,omitempty"`
}

// ReputationResult is what the blocklists say about the sending IP.
type ReputationResult struct {
	// Listings are the lists that list it.
	Listings []Listing
	// Checked counts the lists that answered; Unchecked names those that
	// did not (unhealthy, refusing, too slow).
	Checked   int
	Unchecked []string
}

// ReputationFunc looks ip up on the blocklists. The caller supplies it
// (the reputation catalog and its shared cache); an error makes the
// section unknown. It is called only for a public address.
type ReputationFunc func(ctx context.Context, ip netip.Addr) (ReputationResult, error)

// Options adjust Analyze.
type Options struct {
	// Reputation checks the sending IP against blocklists. When nil, the
	// reputation section is skipped with a note saying so.
	Reputation ReputationFunc
	// Spam scores the message with a content filter (spamd or rspamd).
	// When nil, the spam section is skipped with a note saying so.
	Spam spamcheck.Checker
	// Limits bound the analysis; zero fields take the defaults.
	Limits Limits
}

// Finding is one observation, with what it costs and how to fix it.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Points is what the finding takes from the score (once per ID).
	Points  int    `json:"points"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Section is one part of the report.
type Section struct {
	Name string `json:"name"`
	// Skipped is true when the section could not be run; Note says why.
	Skipped  bool      `json:"skipped"`
	Note     string    `json:"note,omitempty"`
	Findings []Finding `json:"findings"`
}

// Report is the analysis of one message.
type Report struct {
	// Score is 100 minus the points of the distinct findings, at least 0.
	Score int `json:"score"`
	// Grade is A, B, C, D or F (see GradeThresholds).
	Grade   string         `json:"grade"`
	Session Session        `json:"session"`
	Auth    Authentication `json:"authentication"`
	// Verdicts is Auth.Verdicts(), stored with the report for listings.
	Verdicts Verdicts  `json:"verdicts"`
	Listings []Listing `json:"listings"`
	// Spam is the content filter's verdict, absent when none scored the
	// message (see the spam section's note).
	Spam     *spamcheck.Result `json:"spam,omitempty"`
	Sections []Section         `json:"sections"`
	// DNSLookups is the number of DNS queries the analysis made.
	DNSLookups int `json:"dns_lookups"`
}

// Authentication holds the verdicts of the authentication section.
type Authentication struct {
	// SPF is the result for the MAIL FROM identity, which is scored.
	SPF spf.Result `json:"spf"`
	// HeloSPF is the result for the HELO identity, reported only.
	HeloSPF spf.Result `json:"helo_spf"`
	// DKIM has one entry per DKIM-Signature header.
	DKIM []Signature `json:"dkim"`
	// DMARC is the verdict for the From domain.
	DMARC dmarc.Verdict `json:"dmarc"`
	// ReverseDNS is the forward-confirmed reverse DNS of the client IP.
	ReverseDNS ReverseDNS `json:"reverse_dns"`
	// ARC is the ARC chain, reported but not verified.
	ARC ARC `json:"arc"`
}

// Result words used by the authentication details.
const (
	ResultPass      = "pass"
	ResultFail      = "fail"
	ResultNone      = "none"
	ResultTemperror = "temperror"
	ResultPermerror = "permerror"
	ResultNeutral   = "neutral"
	ResultPolicy    = "policy"
)

// Signature is the verification of one DKIM-Signature header.
type Signature struct {
	Domain   string `json:"domain,omitempty"`
	Selector string `json:"selector,omitempty"`
	// Algorithm is e.g. "rsa-sha256" or "ed25519-sha256".
	Algorithm string `json:"algorithm,omitempty"`
	// KeyBits is the public key size, 0 when the key was not found.
	KeyBits int `json:"key_bits,omitempty"`
	// BodyHash is pass, fail, or empty when the check did not get that far.
	BodyHash string `json:"body_hash,omitempty"`
	// Result is the signature's RFC 8601 result: pass, fail, neutral,
	// policy, temperror or permerror.
	Result string `json:"result"`
	// SignedHeaders are the lower-case names in h=.
	SignedHeaders []string `json:"signed_headers,omitempty"`
	// Error explains a result other than pass.
	Error string `json:"error,omitempty"`
}

// ReverseDNS is the forward-confirmed reverse DNS check of the client IP.
type ReverseDNS struct {
	// Result is pass (a PTR name resolves back to the IP), fail or temperror.
	Result string `json:"result"`
	// Names are the PTR names found.
	Names []string `json:"names,omitempty"`
	// Confirmed is the first name whose addresses include the IP.
	Confirmed string `json:"confirmed,omitempty"`
}

// ARC is what the message carries of an ARC chain (RFC 8617).
type ARC struct {
	// Present is true when the message has ARC header fields.
	Present bool `json:"present"`
	// Sets is the highest instance number (i=) seen.
	Sets int `json:"sets,omitempty"`
	// Result is "none", or "present, unverified": no maintained Go library
	// validates ARC chains, so mailwatch does not claim a verdict.
	Result string `json:"result"`
}

// newFinding builds a finding from the Weights table.
func newFinding(id, message string) Finding {
	w, ok := WeightOf(id)
	if !ok {
		return Finding{ID: id, Severity: Info, Message: message}
	}
	return Finding{ID: id, Severity: w.Severity, Points: w.Points, Message: message, Fix: w.Fix}
}

// Analyze judges a received message. raw is the message as received (with
// the receiver's own trace headers or without: neither is needed), s the
// session facts. It returns a complete report whatever the input: problems
// reading the message are findings, DNS failures are temperror verdicts.
// ctx bounds the whole analysis; each lookup is bounded by
// Limits.LookupTimeout and their number by Limits.MaxDNSLookups.
func Analyze(ctx context.Context, r Resolver, raw []byte, s Session, opts Options) *Report {
	lim := opts.Limits.withDefaults()
	s.ClientIP = s.ClientIP.Unmap()
	br := newBudgetResolver(r, lim)
	msg := parseMessage(raw, lim)

	rep := &Report{Session: s, Listings: []Listing{}}
	auth, authFindings := authenticate(ctx, br, raw, msg, s, lim)
	rep.Auth = auth
	rep.Verdicts = auth.Verdicts()
	rep.Sections = []Section{
		{Name: SectionAuthentication, Findings: authFindings},
		reputation(ctx, s.ClientIP, opts.Reputation, rep),
		spamScore(ctx, raw, s, opts.Spam, rep),
		{Name: SectionHeaders, Findings: checkHeaders(msg, auth.DKIM)},
		checkContent(msg, lim),
	}
	for i := range rep.Sections {
		if rep.Sections[i].Findings == nil {
			rep.Sections[i].Findings = []Finding{}
		}
	}
	rep.Score, rep.Grade = Score(rep.Sections)
	rep.DNSLookups = br.used()
	return rep
}

// reputation runs the reputation section, or skips it without a checker.
func reputation(ctx context.Context, ip netip.Addr, check ReputationFunc, rep *Report) Section {
	sec := Section{Name: SectionReputation}
	if check == nil {
		sec.Skipped = true
		sec.Note = "no blocklist catalog is configured, so the sending IP was not checked against blocklists"
		sec.Findings = []Finding{newFinding("reputation_skipped", sec.Note)}
		return sec
	}
	if !isPublic(ip) {
		sec.Note = ip.String() + " is not a public address; blocklists list only public addresses, so it was not looked up"
		sec.Findings = []Finding{newFinding("reputation_not_public", sec.Note)}
		return sec
	}
	res, err := check(ctx, ip)
	if err == nil && res.Checked == 0 {
		err = errors.New("no list answered")
	}
	if err != nil {
		sec.Skipped = true
		sec.Note = "the blocklist check failed, so the sending IP's listings are unknown"
		sec.Findings = []Finding{newFinding("reputation_error", sec.Note)}
		return sec
	}
	rep.Listings = append(rep.Listings, res.Listings...)
	for _, l := range res.Listings {
		msg := ip.String() + " is listed on " + l.List
		if l.Detail != "" {
			msg += " (" + l.Detail + ")"
		}
		id := "ip_listed"
		if l.Informational {
			id = "ip_listed_policy"
		}
		sec.Findings = append(sec.Findings, newFinding(id, msg))
	}
	if n := len(res.Unchecked); n > 0 {
		sec.Note = fmt.Sprintf("%d of %d blocklists gave no usable answer (%s); the others were checked",
			n, n+res.Checked, strings.Join(res.Unchecked, ", "))
		sec.Findings = append(sec.Findings, newFinding("reputation_partial", sec.Note))
	}
	return sec
}

// isPublic reports whether ip could be on a blocklist: not loopback,
// private, link-local, multicast or unspecified.
func isPublic(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && ip.IsGlobalUnicast() && !ip.IsPrivate()
}

// spamScore runs the spam section: the content filter's score against its
// threshold, or a note why there is none.
func spamScore(ctx context.Context, raw []byte, s Session, check spamcheck.Checker, rep *Report) Section {
	sec := Section{Name: SectionSpam}
	if check == nil {
		sec.Skipped = true
		sec.Note = "no content filter is configured, so the message was not given a spam score"
		sec.Findings = []Finding{newFinding("spam_skipped", sec.Note)}
		return sec
	}
	res, err := check.Check(ctx, raw, spamcheck.Envelope{ClientIP: s.ClientIP, Helo: s.Helo, MailFrom: s.MailFrom})
	if err != nil {
		// The error names the operator's filter (its address or socket):
		// the customer reads only what happened.
		sec.Skipped = true
		sec.Note = "the content filter did not score the message: it did not answer, or its answer was unreadable"
		if errors.Is(err, spamcheck.ErrTooLarge) {
			sec.Note = "the content filter did not score the message: it is over the filters' 500 KiB size limit"
		}
		sec.Findings = []Finding{newFinding("spam_not_scored", sec.Note)}
		return sec
	}
	rep.Spam = &res
	verdict := fmt.Sprintf("%s scores the message %.1f (its spam threshold is %.1f)", engineName(res.Engine), res.Score, res.Threshold)
	switch {
	case res.Spam || (res.Threshold > 0 && res.Score >= res.Threshold):
		sec.Findings = []Finding{newFinding("spam_score_high", verdict+topRules(res.Rules))}
	case res.Threshold > 0 && res.Score >= res.Threshold/2:
		sec.Findings = []Finding{newFinding("spam_score_elevated", verdict+topRules(res.Rules))}
	}
	return sec
}

func engineName(e string) string {
	switch e {
	case "spamassassin":
		return "SpamAssassin"
	case "rspamd":
		return "Rspamd"
	}
	return "The content filter"
}

// topRules names the three heaviest rules that added points.
func topRules(rules []spamcheck.Rule) string {
	var names []string
	for _, r := range rules {
		if r.Points > 0 && len(names) < 3 {
			names = append(names, fmt.Sprintf("%s %+.1f", r.Name, r.Points))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; heaviest rules: " + strings.Join(names, ", ")
}
