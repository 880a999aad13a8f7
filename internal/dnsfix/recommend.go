// Package dnsfix turns DNS check results into recommended record changes
// and writes them into customers' zones through DNS connections
// (internal/dnsprovider): the connections and their links to domains, the
// recommendations recomputed after every check, their apply, dismiss and
// restore, and the MX setup of custom inbound subdomains. Its functions
// take the caller's transaction; api/ and jobs/ adapt them.
package dnsfix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// Severities of recommendations (the event severities' words).
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// States of a recommendation.
const (
	StateOpen      = "open"
	StateApplying  = "applying"
	StateApplied   = "applied"
	StateFailed    = "failed"
	StateDismissed = "dismissed"
)

// Rec is one recommended change of one RRset.
type Rec struct {
	// Key names the rule and the RRset; stable across checks.
	Key string
	// Check is the dnscheck name the recommendation comes from.
	Check    string
	Severity string
	// Name and Type are the RRset's.
	Name string
	Type string
	// Current are the records of the RRset the recommendation is about
	// (for TXT, only those of its kind: the SPF records among the apex
	// TXT records); Proposed are what they become. Other records of the
	// RRset are never touched.
	Current  []string
	Proposed []string
	Why      string
	// Manual recommendations are instructions only (a DKIM key's private
	// half is the customer's): they cannot be applied.
	Manual bool
}

// Remove returns the records of Current that Proposed drops.
func (r Rec) Remove() []string {
	var out []string
	for _, v := range r.Current {
		if !slices.Contains(r.Proposed, v) {
			out = append(out, v)
		}
	}
	return out
}

// Add returns the records of Proposed that are new.
func (r Rec) Add() []string {
	var out []string
	for _, v := range r.Proposed {
		if !slices.Contains(r.Current, v) {
			out = append(out, v)
		}
	}
	return out
}

// Op returns the operation's word (dnsprovider.Op*).
func (r Rec) Op() string {
	rm, add := r.Remove(), r.Add()
	switch {
	case len(rm) == 0:
		return dnsprovider.OpCreate
	case len(add) == 0:
		return dnsprovider.OpDeleteRR
	case len(rm) == len(r.Current) && r.Type != "TXT":
		return dnsprovider.OpReplaceRRset
	default:
		return dnsprovider.OpReplaceRR
	}
}

// Fingerprint hashes what the recommendation was computed from: the name,
// the type and the current records (in any order).
func Fingerprint(name, typ string, current []string) string {
	cur := slices.Clone(current)
	sort.Strings(cur)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", strings.ToLower(name), strings.ToUpper(typ))
	for _, c := range cur {
		h.Write([]byte(c))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Fingerprint returns the recommendation's fingerprint.
func (r Rec) Fingerprint() string { return Fingerprint(r.Name, r.Type, r.Current) }

// Selects reports whether a record of the RRset is one the recommendation
// is about (for TXT, a record of its kind), so apply compares and
// replaces only those.
func (r Rec) Selects(v string) bool {
	if r.Type != "TXT" {
		return true
	}
	switch {
	case r.Key == "spf":
		return spf.IsSPF(v)
	case r.Key == "dmarc":
		return dmarc.IsDMARC(v)
	case r.Key == "tls_rpt":
		return dnscheck.IsTLSRPT(v)
	case r.Key == "mta_sts" || r.Key == "mta_sts_enforce":
		return dnscheck.IsSTSRecord(v)
	case strings.HasPrefix(r.Key, "dkim:"):
		return true
	}
	return false
}

// Readiness is DMARC enforcement readiness as the DMARC report analysis
// computes it: whether the domain's reports say the next policy step is
// safe. Until that analysis feeds it (see Inputs.Readiness), no policy
// step is recommended.
type Readiness struct {
	// Ready is true when moving to NextPolicy is safe.
	Ready bool
	// NextPolicy is the policy the reports support (quarantine, reject).
	NextPolicy string
	// Reason explains it (volume, compliant share), for why.
	Reason string
}

// Inputs are what recommendations are computed from besides the checks.
type Inputs struct {
	// ReportAddress is the domain's signed DMARC reporting address;
	// empty: DMARC records are proposed without mailwatch's rua.
	ReportAddress string
	// TLSReportAddress receives TLS-RPT reports; empty means the domain's
	// postmaster (RFC 5321 section 4.5.1 requires that mailbox).
	TLSReportAddress string
	// Readiness is the DMARC enforcement readiness, nil until the DMARC
	// report analysis provides it.
	Readiness *Readiness
	// FlatSPF is the flattened form of FlatSPFFrom (the domain's SPF
	// record when it was flattened); see Flatten. Empty when the record
	// needs no flattening or could not be flattened.
	FlatSPF     string
	FlatSPFFrom string
	// MTASTSSafeToEnforce is set when the MX transport probes say a
	// testing MTA-STS policy can move to enforce (transport.View).
	MTASTSSafeToEnforce bool
	// NonexistentSubdomains are subdomains mail claimed while DNS says
	// they do not exist, busiest first: the DMARC record then gains np
	// (npProposal).
	NonexistentSubdomains []NonexistentName
}

// Compute returns the recommendations for a domain's known check results,
// in key order.
func Compute(domain string, known *dnscheck.Results, in Inputs) []Rec {
	if known == nil {
		return nil
	}
	var out []Rec
	add := func(r *Rec) {
		if r != nil {
			out = append(out, *r)
		}
	}
	nonMail := isNonMail(known)
	add(spfRec(domain, known, in, nonMail))
	add(dmarcRec(domain, known, in))
	add(nullMXRec(domain, known, nonMail))
	add(tlsRPTRec(domain, known, in))
	add(mtaSTSRec(domain, known))
	add(mtaSTSEnforceRec(domain, known, in))
	out = append(out, dkimRecs(domain, known)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func known(r *dnscheck.Result) bool {
	return r != nil && r.Status != dnscheck.StatusTemperror
}

// isNonMail is a domain that neither receives (no MX) nor shows signs of
// sending (no SPF that authorises anything, no DKIM key).
func isNonMail(k *dnscheck.Results) bool {
	if k.MX == nil || k.MX.Status != dnscheck.StatusNone {
		return false
	}
	if k.DKIM != nil && (k.DKIM.Status == dnscheck.StatusPass || k.DKIM.Status == dnscheck.StatusWarn) {
		return false
	}
	if k.SPF == nil {
		return false
	}
	switch k.SPF.Status {
	case dnscheck.StatusNone:
		return true
	case dnscheck.StatusPass, dnscheck.StatusWarn:
		return len(k.SPF.Records) == 1 && strings.Join(strings.Fields(k.SPF.Records[0]), " ") == "v=spf1 -all"
	}
	return false
}

func spfRec(domain string, k *dnscheck.Results, in Inputs, nonMail bool) *Rec {
	if k.SPF == nil || !known(&k.SPF.Result) {
		return nil
	}
	r := &Rec{Key: "spf", Check: dnscheck.NameSPF, Name: domain, Type: "TXT", Current: nonNil(k.SPF.Records)}
	switch {
	case k.SPF.Status == dnscheck.StatusNone && nonMail:
		r.Severity, r.Proposed = SeverityWarning, []string{"v=spf1 -all"}
		r.Why = fmt.Sprintf("%s has no MX and no DKIM key, so it looks like a domain that sends no mail: \"v=spf1 -all\" makes receivers reject mail forged in its name.", domain)
		return r
	case len(k.SPF.Records) != 1:
		return nil
	case k.SPF.Lookups > spf.MaxLookups && in.FlatSPF != "" && in.FlatSPFFrom == k.SPF.Records[0]:
		r.Severity, r.Proposed = SeverityCritical, []string{in.FlatSPF}
		r.Why = fmt.Sprintf("The SPF record needs %d DNS lookups, over the limit of %d (RFC 7208 section 4.6.4), so receivers get permerror and SPF fails for all your mail. The proposed record replaces include, a and mx terms by the addresses they resolve to today (flattening). Those addresses can change: mailwatch re-checks and recommends again when they do.", k.SPF.Lookups, spf.MaxLookups)
		return r
	case k.SPF.Default == string(spf.Pass):
		rec := k.SPF.Records[0]
		fields := strings.Fields(rec)
		for i, f := range fields {
			if f == "all" || f == "+all" {
				fields[i] = "~all"
			}
		}
		next := strings.Join(fields, " ")
		if next == rec {
			return nil
		}
		r.Severity, r.Proposed = SeverityCritical, []string{next}
		r.Why = "The SPF record ends in \"+all\", which authorises every server on the Internet to send as the domain. \"~all\" marks unlisted senders as suspicious; move to \"-all\" once the listed senders are complete."
		return r
	}
	return nil
}

func dmarcRec(domain string, k *dnscheck.Results, in Inputs) *Rec {
	if k.DMARC == nil || !known(&k.DMARC.Result) || k.DMARC.Inherited {
		return nil
	}
	name := "_dmarc." + domain
	r := &Rec{Key: "dmarc", Check: dnscheck.NameDMARC, Name: name, Type: "TXT", Current: nonNil(k.DMARC.Records)}
	if k.DMARC.Status == dnscheck.StatusNone && len(k.DMARC.Records) == 0 {
		r.Severity, r.Proposed = SeverityWarning, []string{NewDMARC(in.ReportAddress)}
		r.Why = "The domain has no DMARC record, so receivers cannot tell forged mail from yours and nobody sends you reports. Start at p=none to collect reports" + withReports(in) + "; mailwatch recommends the next policy when the reports show your senders pass."
		return r
	}
	if len(k.DMARC.Records) != 1 {
		return nil
	}
	policy, reasons := "", []string{}
	if in.Readiness != nil && in.Readiness.Ready && k.DMARC.Parsed != nil && NextPolicy(k.DMARC.Parsed.Policy) == in.Readiness.NextPolicy {
		policy = in.Readiness.NextPolicy
		reasons = append(reasons, fmt.Sprintf("move to p=%s: %s", policy, in.Readiness.Reason))
	}
	merged, err := MergeDMARC(k.DMARC.Records[0], in.ReportAddress, policy)
	if err != nil {
		return nil
	}
	if np, why := npProposal(k.DMARC.Parsed, in.NonexistentSubdomains); np != "" {
		if withNonexistent, err := withNP(merged, np); err == nil {
			merged = withNonexistent
			reasons = append(reasons, why)
		}
	}
	if merged == k.DMARC.Records[0] {
		return nil
	}
	if k.DMARC.Parsed != nil && slices.Contains(k.DMARC.Parsed.Tags, "pct") {
		reasons = append(reasons, "remove pct (DMARCbis drops it; receivers apply a policy to all mail or none)")
	}
	if in.ReportAddress != "" && !strings.Contains(strings.ToLower(k.DMARC.Records[0]), strings.ToLower(in.ReportAddress)) {
		reasons = append(reasons, "add mailwatch's reporting address to rua (your other destinations stay)")
	}
	r.Severity, r.Proposed = SeverityWarning, []string{merged}
	if policy != "" {
		r.Severity = SeverityInfo
	}
	r.Why = "Update the DMARC record: " + strings.Join(reasons, "; ") + "."
	return r
}

func withReports(in Inputs) string {
	if in.ReportAddress == "" {
		return ""
	}
	return " at mailwatch's reporting address"
}

func nullMXRec(domain string, k *dnscheck.Results, nonMail bool) *Rec {
	if !nonMail {
		return nil
	}
	return &Rec{
		Key: "mx_null", Check: dnscheck.NameMX, Severity: SeverityInfo, Name: domain, Type: "MX",
		Current: []string{}, Proposed: []string{"0 ."},
		Why: "A null MX (RFC 7505) says the domain accepts no mail, so senders fail at once instead of retrying for days, and mail claiming to come from it is easier to reject.",
	}
}

func tlsRPTRec(domain string, k *dnscheck.Results, in Inputs) *Rec {
	if k.TLSRPT == nil || k.TLSRPT.Status != dnscheck.StatusNone || k.MX == nil || len(k.MX.Hosts) == 0 || k.MX.NullMX {
		return nil
	}
	rec, _ := dnscheck.ProposeTLSRPT(domain, nil, in.TLSReportAddress, nil)
	return &Rec{
		Key: "tls_rpt", Check: dnscheck.NameTLSRPT, Severity: SeverityInfo, Name: "_smtp._tls." + domain, Type: "TXT",
		Current: []string{}, Proposed: []string{rec},
		Why: "SMTP TLS reporting (RFC 8460) makes senders report TLS failures delivering to your MX hosts.",
	}
}

func mtaSTSRec(domain string, k *dnscheck.Results) *Rec {
	if k.MTASTS == nil || k.MTASTS.Status != dnscheck.StatusNone || k.MX == nil || len(k.MX.Hosts) == 0 || k.MX.NullMX {
		return nil
	}
	return &Rec{
		Key: "mta_sts", Check: dnscheck.NameMTASTS, Severity: SeverityInfo, Name: "_mta-sts." + domain, Type: "TXT",
		Current: []string{}, Proposed: []string{"v=STSv1; id=<policy version, e.g. 20260101000000>"}, Manual: true,
		Why: fmt.Sprintf("MTA-STS (RFC 8461) makes senders require TLS to your MX hosts. First serve a policy (\"version: STSv1\", \"mode: testing\", one \"mx:\" line per MX host, \"max_age: 604800\") at https://mta-sts.%s/.well-known/mta-sts.txt, then publish this record; mailwatch cannot host the policy for you.", domain),
	}
}

// mtaSTSEnforceRec advises moving a testing MTA-STS policy to enforce once
// the MX transport probes found it safe: the policy file changes (which
// mailwatch cannot do) and the TXT record's id with it.
func mtaSTSEnforceRec(domain string, k *dnscheck.Results, in Inputs) *Rec {
	if !in.MTASTSSafeToEnforce || k.MTASTS == nil || k.MTASTS.Policy == nil || k.MTASTS.Policy.Mode != "testing" {
		return nil
	}
	current := []string{}
	for _, r := range k.MTASTS.Records {
		if dnscheck.IsSTSRecord(r) {
			current = append(current, r)
		}
	}
	return &Rec{
		Key: "mta_sts_enforce", Check: dnscheck.NameMTASTS, Severity: SeverityInfo, Name: "_mta-sts." + domain, Type: "TXT",
		Current: current, Proposed: []string{"v=STSv1; id=<new policy version, e.g. 20260101000000>"}, Manual: true,
		Why: fmt.Sprintf("Safe to enforce: every MX host passed a verified TLS handshake with a certificate valid for its name and matching the policy's mx lines. Change \"mode: testing\" to \"mode: enforce\" in https://mta-sts.%s/.well-known/mta-sts.txt, then publish a new id in this record.", domain),
	}
}

func dkimRecs(domain string, k *dnscheck.Results) []Rec {
	if k.DKIM == nil || !known(&k.DKIM.Result) {
		return nil
	}
	var out []Rec
	for _, sel := range k.DKIM.Selectors {
		if sel.Key == nil || sel.Key.Revoked || sel.Key.KeyType != "rsa" || sel.Key.Bits >= 2048 || sel.Record == "" {
			continue
		}
		sev := SeverityWarning
		if sel.Key.Bits < 1024 {
			sev = SeverityCritical
		}
		out = append(out, Rec{
			Key: "dkim:" + sel.Selector, Check: dnscheck.NameDKIM, Severity: sev, Name: sel.Name, Type: "TXT",
			Current: []string{sel.Record}, Proposed: []string{"v=DKIM1; k=rsa; p=<base64 public key of a new 2048-bit RSA key>"}, Manual: true,
			Why: fmt.Sprintf("The DKIM key at selector %q is %d bits; RFC 8301 requires at least 1024 and recommends 2048. Generate a new 2048-bit key where your mail is signed (the private key stays with you), publish it under a new selector, switch signing to it, then remove this one.", sel.Selector, sel.Key.Bits),
		})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
