package dnsfix

import (
	"fmt"
	"strings"

	"github.com/mailwatch/mailwatch/internal/dmarc"
)

// NonexistentName is a subdomain of the domain that mail claimed in its
// From header (DMARC aggregate reports, over the last 30 days) while DNS
// answered NXDOMAIN for it: nothing can legitimately send from a name that
// does not exist.
type NonexistentName struct {
	Name     string
	Messages int64
	// Passing is how many of Messages passed DMARC.
	Passing int64
}

// maxNPExamples bounds the names an np proposal's why lists.
const maxNPExamples = 3

// npProposal is ProposeNP for a parsed DMARC record (nil: none).
func npProposal(rec *dmarc.Record, names []NonexistentName) (string, string) {
	if rec == nil {
		return "", ""
	}
	return ProposeNP(rec.Policy, rec.SubdomainPolicy, rec.NonexistentPolicy, names)
}

// ProposeNP returns the np= value (DMARCbis: the policy for non-existent
// subdomains) to add to a DMARC record of tags p, sp and np, with its
// reason, or "" when there is none to add: no mail claimed a non-existent
// subdomain, the record already has np, or the policy that already applies
// to subdomains (sp, else p) is reject, which np would only repeat. The DNS
// recommendation and the DMARC guidance both ask it.
func ProposeNP(p, sp, np string, names []NonexistentName) (string, string) {
	if len(names) == 0 || np != "" {
		return "", ""
	}
	effective := sp
	if effective == "" {
		effective = p
	}
	if effective == dmarc.PolicyReject {
		return "", ""
	}
	var ex []string
	var messages int64
	for i, n := range names {
		messages += n.Messages
		if i < maxNPExamples {
			ex = append(ex, fmt.Sprintf("%s: %d messages, %s passing DMARC", n.Name, n.Messages, rateText(n.Passing, n.Messages)))
		}
	}
	if more := len(names) - len(ex); more > 0 {
		ex = append(ex, fmt.Sprintf("%d more", more))
	}
	return dmarc.PolicyReject, fmt.Sprintf("add np=reject (DMARCbis): over the last 30 days, %d messages claimed %d subdomains that do not exist in DNS (%s); "+
		"nothing legitimate sends from a name that does not exist, and np applies only to such names, so the domain and its existing subdomains keep their policy "+
		"(mail that passes DMARC is never affected)", messages, len(names), strings.Join(ex, "; "))
}

func rateText(passing, messages int64) string {
	if messages == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f%%", float64(passing)*100/float64(messages))
}

// withNP returns the DMARC record rec with np=value added after sp (or p).
func withNP(rec, value string) (string, error) {
	tags := splitDMARC(rec)
	at := len(tags)
	for i, t := range tags {
		if t.name == "p" || t.name == "sp" {
			at = i + 1
		}
	}
	out := make([]dmarcTag, 0, len(tags)+1)
	out = append(out, tags[:at]...)
	out = append(out, dmarcTag{"np", value})
	out = append(out, tags[at:]...)
	merged := joinDMARC(out)
	if _, err := dmarc.ParseRecord(merged); err != nil {
		return "", fmt.Errorf("the record with np does not parse: %w", err)
	}
	return merged, nil
}
