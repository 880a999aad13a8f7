package dnsfix

import (
	"fmt"
	"strings"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// MaxRecordBytes bounds a TXT value a builder proposes (and accepts as
// input): RFC 7208 section 3.4 asks SPF answers to fit a 512-byte UDP
// response; 2048 leaves room for DMARC with several destinations while
// keeping every builder's cost bounded.
const MaxRecordBytes = 2048

// dmarcTag is one tag=value of a DMARC record as written.
type dmarcTag struct{ name, value string }

func splitDMARC(rec string) []dmarcTag {
	var tags []dmarcTag
	for _, part := range strings.Split(rec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		tags = append(tags, dmarcTag{strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)})
	}
	return tags
}

func joinDMARC(tags []dmarcTag) string {
	parts := make([]string, len(tags))
	for i, t := range tags {
		parts[i] = t.name + "=" + t.value
	}
	return strings.Join(parts, "; ")
}

// MergeDMARC returns rec with reportAddress added to rua (existing
// destinations are kept, never replaced), pct removed (DMARCbis drops it;
// a partial policy is what the "next step" ladder replaces), and p set to
// policy when policy is not empty. It returns an error when rec is not a
// DMARC record the parser accepts, and the result always parses.
func MergeDMARC(rec, reportAddress, policy string) (string, error) {
	if len(rec) > MaxRecordBytes {
		return "", fmt.Errorf("the record is longer than %d bytes", MaxRecordBytes)
	}
	if _, err := dmarc.ParseRecord(rec); err != nil {
		return "", err
	}
	tags := splitDMARC(rec)
	out := tags[:0:0]
	haveRUA := false
	for _, t := range tags {
		switch t.name {
		case "pct":
			continue
		case "p":
			if policy != "" {
				t.value = policy
			}
		case "rua":
			haveRUA = true
			if reportAddress != "" {
				t.value, _ = MergeRUA(t.value, reportAddress, nil)
			}
		}
		out = append(out, t)
	}
	if !haveRUA && reportAddress != "" {
		out = append(out, dmarcTag{"rua", "mailto:" + reportAddress})
	}
	merged := joinDMARC(out)
	if _, err := dmarc.ParseRecord(merged); err != nil {
		return "", fmt.Errorf("the merged record does not parse: %w", err)
	}
	return merged, nil
}

// MergeRUA is the one rua merge (the DNS recommendation and the
// reporting-address instructions): rua is the tag's value as written (""
// when the record has none); the result keeps every destination as written
// (size limits included) and appends mailto:addr. When a destination
// already mails an address of ours, rua is returned unchanged and named is
// true. ours gets a lower-cased address; nil means addr alone.
func MergeRUA(rua, addr string, ours func(addr string) bool) (merged string, named bool) {
	if ours == nil {
		ours = func(a string) bool { return strings.EqualFold(a, addr) }
	}
	for _, u := range strings.Split(rua, ",") {
		u, _, _ = strings.Cut(u, "!") // the size limit
		if a, ok := dnscheck.MailtoAddress(u); ok && ours(a) {
			return rua, true
		}
	}
	if strings.TrimSpace(rua) == "" {
		return "mailto:" + addr, false
	}
	return rua + ",mailto:" + addr, false
}

// TagValue returns the value of the tag name (lower case) of a DMARC
// record as written; ok is false when the record has no such tag.
func TagValue(rec, name string) (value string, ok bool) {
	for _, t := range splitDMARC(rec) {
		if t.name == name {
			return t.value, true
		}
	}
	return "", false
}

// NewDMARC returns the DMARC record proposed for a domain without one:
// p=none (monitoring first), reports to reportAddress when given.
func NewDMARC(reportAddress string) string {
	if reportAddress == "" {
		return "v=DMARC1; p=none"
	}
	return "v=DMARC1; p=none; rua=mailto:" + reportAddress
}

// NextPolicy is the next step of the enforcement ladder none -> quarantine
// -> reject, or "" at the top.
func NextPolicy(p string) string {
	switch p {
	case "", "none":
		return "quarantine"
	case "quarantine":
		return "reject"
	}
	return ""
}
