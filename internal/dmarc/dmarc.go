// Package dmarc parses DMARC records and evaluates a domain's DMARC posture,
// per RFC 7489, with the tags its successor DMARCbis
// (draft-ietf-dmarc-dmarcbis) adds (np, t, psd) and the ones it removes (pct,
// rf, ri) flagged as obsolete.
//
// # Status of a posture evaluation
//
// Evaluation.Status uses the result words of RFC 7489 section 11.2 (as
// registered for Authentication-Results, RFC 8601), with the meaning they
// have for a domain:
//
//   - none: no DMARC record at the domain nor at its organizational domain
//     (RFC 7489 section 6.6.3); receivers apply no DMARC policy.
//   - pass: one valid DMARC record applies to the domain. Warnings (such as
//     p=none, or no rua) do not change the status.
//   - permerror: a record exists but receivers will ignore it: several
//     records, or a syntax error.
//   - temperror: the lookup timed out or the resolver answered SERVFAIL.
package dmarc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Status is the outcome of a DMARC posture evaluation.
type Status string

// Statuses of an Evaluation.
const (
	None      Status = "none"
	Pass      Status = "pass"
	Temperror Status = "temperror"
	Permerror Status = "permerror"
)

// Resolver is the DNS interface this package needs. *net.Resolver satisfies
// it, as does the mailwatch DNS client. Errors must be *net.DNSError values:
// IsNotFound for NXDOMAIN and NODATA, anything else is a temperror.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// Evaluation is the DMARC posture of a domain.
type Evaluation struct {
	Domain string `json:"domain"`
	Status Status `json:"status"`
	// RecordDomain is the domain whose _dmarc record applies: Domain, or its
	// organizational domain when Domain has none.
	RecordDomain string `json:"record_domain,omitempty"`
	// Inherited is true when the record is the organizational domain's, in
	// which case its sp (or p) applies to Domain.
	Inherited bool `json:"inherited"`
	// Records are the DMARC TXT records at _dmarc.RecordDomain.
	Records []string `json:"records,omitempty"`
	// Record is the parsed record, if exactly one valid record was found.
	Record *Record `json:"record,omitempty"`
	// EffectivePolicy is the policy applied to mail from Domain: p, or sp
	// when inherited.
	EffectivePolicy string `json:"effective_policy,omitempty"`
	// External is the authorisation check of each report destination
	// outside the organizational domain (RFC 7489 section 7.1).
	External     []External `json:"external,omitempty"`
	Errors       []string   `json:"errors,omitempty"`
	Warnings     []string   `json:"warnings,omitempty"`
	Instructions []string   `json:"instructions,omitempty"`
}

// External is the verification of one external report destination.
type External struct {
	// Destination is the destination's domain.
	Destination string `json:"destination"`
	// Name is the TXT name queried: <domain>._report._dmarc.<destination>.
	Name string `json:"name"`
	// Authorized is true when Name has a "v=DMARC1" record.
	Authorized bool `json:"authorized"`
	// Error is set when the lookup failed temporarily.
	Error string `json:"error,omitempty"`
}

// Options adjust Evaluate.
type Options struct {
	// ReportAddress, when set, is the rua address mailwatch asks customers to
	// publish (e.g. "dmarc+token@reports.example.net"); instructions refer
	// to it and a record without it gets a warning.
	ReportAddress string
}

// OrganizationalDomain returns the organizational domain of domain (RFC 7489
// section 3.2): the public suffix plus one label. It returns domain itself
// when that cannot be determined.
func OrganizationalDomain(domain string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		return domain
	}
	return org
}

// Lookup finds the DMARC records that apply to domain (RFC 7489 section
// 6.6.3): those at _dmarc.<domain>, else those at _dmarc.<organizational
// domain>. It returns the domain where they were found, the DMARC records
// (TXT records not starting with v=DMARC1 are discarded), and an error only
// for temporary failures; no records is not an error.
func Lookup(ctx context.Context, r Resolver, domain string) (recordDomain string, records []string, err error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	records, err = lookup(ctx, r, domain)
	if err != nil || len(records) > 0 {
		return domain, records, err
	}
	org := OrganizationalDomain(domain)
	if org == domain {
		return domain, nil, nil
	}
	records, err = lookup(ctx, r, org)
	if err != nil || len(records) > 0 {
		return org, records, err
	}
	return domain, nil, nil
}

func lookup(ctx context.Context, r Resolver, domain string) ([]string, error) {
	txts, err := r.LookupTXT(ctx, "_dmarc."+domain)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up _dmarc.%s failed: %w", domain, err)
	}
	var records []string
	for _, t := range txts {
		if IsDMARC(t) {
			records = append(records, t)
		}
	}
	return records, nil
}

// VerifyExternal checks that destination agrees to receive reports about
// policyDomain (RFC 7489 section 7.1): a TXT record starting with
// "v=DMARC1" at <policyDomain>._report._dmarc.<destination>. The error is
// set only for temporary failures.
func VerifyExternal(ctx context.Context, r Resolver, policyDomain, destination string) (bool, error) {
	name := policyDomain + "._report._dmarc." + destination
	txts, err := r.LookupTXT(ctx, name)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up %s failed: %w", name, err)
	}
	for _, t := range txts {
		if IsDMARC(t) {
			return true, nil
		}
	}
	return false, nil
}

// Evaluate looks up and reviews the DMARC record that applies to domain.
func Evaluate(ctx context.Context, r Resolver, domain string, opts Options) *Evaluation {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	ev := &Evaluation{Domain: domain}
	recordDomain, records, err := Lookup(ctx, r, domain)
	ev.RecordDomain = recordDomain
	ev.Records = records
	ev.Inherited = recordDomain != domain
	rua := "rua=mailto:dmarc-reports@" + domain
	if opts.ReportAddress != "" {
		rua = "rua=mailto:" + opts.ReportAddress
	}
	switch {
	case err != nil:
		ev.Status = Temperror
		ev.Errors = append(ev.Errors, err.Error())
		return ev
	case len(records) == 0:
		ev.Status = None
		ev.RecordDomain = ""
		ev.Errors = append(ev.Errors, fmt.Sprintf("no DMARC record at _dmarc.%s", domain))
		ev.Instructions = append(ev.Instructions, fmt.Sprintf("Publish a TXT record at _dmarc.%s with the value \"v=DMARC1; p=none; %s\", then move to p=quarantine and p=reject once reports show your mail passes.", OrganizationalDomain(domain), rua))
		return ev
	case len(records) > 1:
		ev.Status = Permerror
		ev.Errors = append(ev.Errors, fmt.Sprintf("_dmarc.%s has %d DMARC records; receivers ignore them all (RFC 7489 section 6.6.3)", recordDomain, len(records)))
		ev.Instructions = append(ev.Instructions, fmt.Sprintf("Keep exactly one TXT record starting with v=DMARC1 at _dmarc.%s.", recordDomain))
		return ev
	}
	rec, err := ParseRecord(records[0])
	if err != nil {
		ev.Status = Permerror
		ev.Errors = append(ev.Errors, err.Error())
		ev.Instructions = append(ev.Instructions, fmt.Sprintf("Fix the record at _dmarc.%s; a minimal valid record is \"v=DMARC1; p=none; %s\".", recordDomain, rua))
		return ev
	}
	ev.Status = Pass
	ev.Record = rec
	ev.review(ctx, r, opts, rua)
	return ev
}

// review adds the warnings and instructions for a valid record.
func (ev *Evaluation) review(ctx context.Context, r Resolver, opts Options, rua string) {
	rec := ev.Record
	warn := func(format string, args ...any) { ev.Warnings = append(ev.Warnings, fmt.Sprintf(format, args...)) }
	instruct := func(format string, args ...any) {
		ev.Instructions = append(ev.Instructions, fmt.Sprintf(format, args...))
	}

	policy := rec.Policy
	if policy == "" {
		if len(rec.AggregateURIs) == 0 {
			// Section 6.6.3: without p and without a valid rua, receivers
			// apply no DMARC processing.
			ev.Status = Permerror
			ev.Errors = append(ev.Errors, "the record has no p tag and no rua; receivers ignore it (RFC 7489 section 6.6.3)")
			instruct("Add \"p=none\" (or stricter) to the record at _dmarc.%s.", ev.RecordDomain)
			return
		}
		warn("the record has no p tag; receivers treat it as p=none")
		policy = PolicyNone
	}
	ev.EffectivePolicy = policy
	if ev.Inherited {
		if rec.SubdomainPolicy != "" {
			ev.EffectivePolicy = rec.SubdomainPolicy
		}
		warn("%s has no DMARC record of its own; the record of its organizational domain %s applies (policy %s)", ev.Domain, ev.RecordDomain, ev.EffectivePolicy)
	}

	switch ev.EffectivePolicy {
	case PolicyNone:
		warn("policy is none: receivers only report failures, they do not reject or quarantine spoofed mail")
		instruct("Once aggregate reports show all your legitimate mail passing DMARC, change the policy to p=quarantine, then p=reject.")
	case PolicyQuarantine:
		instruct("Consider p=reject once quarantine shows no legitimate mail failing.")
	}
	if !ev.Inherited && rec.SubdomainPolicy == PolicyNone && policy != PolicyNone {
		warn("sp=none leaves subdomains unprotected although the domain's policy is %s", policy)
		instruct("Remove sp=none, or set sp=%s, unless a subdomain still needs monitoring only.", policy)
	}
	if rec.Testing == "y" {
		warn("t=y (testing): receivers apply one policy level less strict (DMARCbis)")
	}
	if slices.Contains(rec.Tags, "pct") {
		warn("pct is obsolete in DMARCbis and replaced by t; receivers may ignore it")
		if rec.Percent < 100 {
			warn("pct=%d: the policy applies to only %d%% of failing mail", rec.Percent, rec.Percent)
			instruct("Remove pct once you are confident in the policy; use t=y for a testing phase instead.")
		}
	}
	if slices.Contains(rec.Tags, "rf") {
		warn("rf is obsolete in DMARCbis; remove it")
	}
	if slices.Contains(rec.Tags, "ri") {
		warn("ri is obsolete in DMARCbis; receivers send reports daily whatever it says")
	}
	for _, u := range rec.Unknown {
		warn("unknown tag %q is ignored", u)
	}

	if len(rec.AggregateURIs) == 0 {
		warn("no rua: you receive no aggregate reports, so you cannot see who sends mail as your domain")
		instruct("Add \"%s\" to the record at _dmarc.%s.", rua, ev.RecordDomain)
	} else if opts.ReportAddress != "" && !hasAddress(rec.AggregateURIs, opts.ReportAddress) {
		warn("rua does not include the mailwatch reporting address %s, so mailwatch receives no reports", opts.ReportAddress)
		instruct("Add \"mailto:%s\" to the rua tag at _dmarc.%s (separate URIs with commas).", opts.ReportAddress, ev.RecordDomain)
	}

	org := OrganizationalDomain(ev.RecordDomain)
	checked := map[string]bool{}
	for _, list := range [][]URI{rec.AggregateURIs, rec.FailureURIs} {
		for _, u := range list {
			if u.Scheme != "mailto" {
				warn("report URI %q is not mailto; most receivers only send reports by email", u.Raw)
				continue
			}
			if OrganizationalDomain(u.Domain) == org || checked[u.Domain] {
				continue
			}
			checked[u.Domain] = true
			ok, err := VerifyExternal(ctx, r, ev.RecordDomain, u.Domain)
			x := External{Destination: u.Domain, Name: ev.RecordDomain + "._report._dmarc." + u.Domain, Authorized: ok}
			switch {
			case err != nil:
				x.Error = err.Error()
				warn("could not verify that %s accepts reports for %s: %v", u.Domain, ev.RecordDomain, err)
			case !ok:
				warn("%s has not authorised reports for %s, so receivers will not send them there (RFC 7489 section 7.1)", u.Domain, ev.RecordDomain)
				instruct("Ask the operator of %s to publish a TXT record \"v=DMARC1\" at %s, or remove that address.", u.Domain, x.Name)
			}
			ev.External = append(ev.External, x)
		}
	}
}

func hasAddress(uris []URI, addr string) bool {
	for _, u := range uris {
		if strings.EqualFold(u.Address, addr) {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}
