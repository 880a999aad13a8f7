package deliverability

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Assertion types: what a QA test can require of a received message.
const (
	AssertSPFPass             = "spf_pass"
	AssertDKIMPass            = "dkim_pass"
	AssertDMARCPass           = "dmarc_pass"
	AssertSpamScoreAtMost     = "spam_score_at_most"
	AssertNotBlocklisted      = "not_blocklisted"
	AssertHeaderEquals        = "header_equals"
	AssertHeaderContains      = "header_contains"
	AssertHeaderAbsent        = "header_absent"
	AssertOneClickUnsubscribe = "one_click_unsubscribe"
	AssertLinkCountAtMost     = "link_count_at_most"
	AssertLinkCountAtLeast    = "link_count_at_least"
	AssertSizeAtMost          = "size_at_most"
	AssertGradeAtLeast        = "grade_at_least"
)

// AssertionTypes lists the assertion types, in the order they are
// documented.
var AssertionTypes = []string{
	AssertSPFPass, AssertDKIMPass, AssertDMARCPass, AssertSpamScoreAtMost, AssertNotBlocklisted,
	AssertHeaderEquals, AssertHeaderContains, AssertHeaderAbsent, AssertOneClickUnsubscribe,
	AssertLinkCountAtMost, AssertLinkCountAtLeast, AssertSizeAtMost, AssertGradeAtLeast,
}

// Bounds of a list of assertions (outside input).
const (
	MaxAssertions         = 50
	MaxAssertionNameLen   = 200
	MaxAssertionValueLen  = 1000
	maxAssertionActualLen = 1000
)

// Assertion is one requirement. Name is the header field name of the
// header assertions; Value the expected header value (header_equals,
// header_contains) or grade (grade_at_least); Limit the bound of the
// spam_score, link_count and size assertions.
type Assertion struct {
	Type  string
	Name  string
	Value string
	Limit *float64
}

// AssertionResult is the outcome of one assertion. Reason says why it
// failed (empty when it passed); Actual is what was found.
type AssertionResult struct {
	Type   string
	Pass   bool
	Reason string
	Actual string
}

// HeaderField is one header field of the message asserted on.
type HeaderField struct {
	Name, Value string
}

// Subject is what assertions judge: the message's facts and its analysis.
// Report is nil when there is none; NoReport then says why.
type Subject struct {
	Report   *Report
	NoReport string
	Headers  []HeaderField
	Links    int
	Size     int
}

// Check runs every assertion against s. An unknown type, or an assertion
// missing what it needs, is a failed result with its reason.
func Check(s Subject, as []Assertion) (bool, []AssertionResult) {
	out := make([]AssertionResult, len(as))
	all := true
	for i, a := range as {
		r := check(s, a)
		r.Type = a.Type
		r.Actual = truncate(r.Actual, maxAssertionActualLen)
		out[i] = r
		all = all && r.Pass
	}
	return all, out
}

func check(s Subject, a Assertion) AssertionResult {
	switch a.Type {
	case AssertHeaderEquals, AssertHeaderContains, AssertHeaderAbsent:
		return checkHeader(s.Headers, a)
	case AssertLinkCountAtMost, AssertLinkCountAtLeast, AssertSizeAtMost:
		return checkCount(s, a)
	case AssertSPFPass, AssertDKIMPass, AssertDMARCPass, AssertSpamScoreAtMost, AssertNotBlocklisted,
		AssertOneClickUnsubscribe, AssertGradeAtLeast:
		if s.Report == nil {
			return AssertionResult{Reason: "the message has no analysis: " + s.NoReport}
		}
		return checkReport(s.Report, a)
	}
	return AssertionResult{Reason: fmt.Sprintf("unknown assertion type %q; known types: %s", truncate(a.Type, 100), strings.Join(AssertionTypes, ", "))}
}

func checkReport(rep *Report, a Assertion) AssertionResult {
	switch a.Type {
	case AssertSPFPass:
		return verdictIs("SPF", rep.Auth.Verdicts().SPF)
	case AssertDKIMPass:
		return verdictIs("DKIM", rep.Auth.Verdicts().DKIM)
	case AssertDMARCPass:
		return verdictIs("DMARC", rep.Auth.Verdicts().DMARC)
	case AssertSpamScoreAtMost:
		if a.Limit == nil {
			return AssertionResult{Reason: "limit (the highest spam score allowed) is required"}
		}
		return checkSpamScore(rep, *a.Limit)
	case AssertNotBlocklisted:
		return checkBlocklists(rep)
	case AssertOneClickUnsubscribe:
		return checkOneClick(rep)
	default: // AssertGradeAtLeast
		return checkGrade(rep.Grade, a.Value)
	}
}

// checkSpamScore holds the content filter's score to limit; without a
// score (no filter, or it could not score the message) it fails with the
// spam section's note.
func checkSpamScore(rep *Report, limit float64) AssertionResult {
	if rep.Spam == nil {
		reason := "no spam score: the analysis has none"
		for _, s := range rep.Sections {
			if s.Name == SectionSpam && s.Note != "" {
				reason = "no spam score: " + s.Note
			}
		}
		return AssertionResult{Reason: reason, Actual: "unknown"}
	}
	actual := strconv.FormatFloat(rep.Spam.Score, 'f', -1, 64)
	if rep.Spam.Score <= limit {
		return AssertionResult{Pass: true, Actual: actual}
	}
	return AssertionResult{Reason: fmt.Sprintf("the spam score is %s, not at most %s", actual, strconv.FormatFloat(limit, 'f', -1, 64)),
		Actual: actual}
}

func verdictIs(what, got string) AssertionResult {
	if got == ResultPass {
		return AssertionResult{Pass: true, Actual: got}
	}
	return AssertionResult{Reason: what + " is " + got + ", not pass", Actual: got}
}

func checkBlocklists(rep *Report) AssertionResult {
	for _, s := range rep.Sections {
		if s.Name == SectionReputation && s.Skipped {
			return AssertionResult{Reason: "the blocklist check did not run: " + s.Note, Actual: "unknown"}
		}
	}
	// A policy listing (Spamhaus PBL) says what kind of address it is,
	// not that it sent abuse: it does not fail the assertion.
	var names []string
	for _, l := range rep.Listings {
		if !l.Informational {
			names = append(names, l.List)
		}
	}
	if len(names) == 0 {
		return AssertionResult{Pass: true, Actual: "listed on no blocklist"}
	}
	return AssertionResult{
		Reason: rep.Session.ClientIP.String() + " is listed on " + strings.Join(names, ", "),
		Actual: strings.Join(names, ", "),
	}
}

// oneClickFindings are the findings that mean a message lacks RFC 8058
// one-click unsubscription (one_click_unsigned is about its signature,
// not its presence).
var oneClickFindings = []string{"list_unsubscribe_missing", "list_unsubscribe_no_https", "one_click_missing"}

func checkOneClick(rep *Report) AssertionResult {
	for _, s := range rep.Sections {
		for _, f := range s.Findings {
			if slices.Contains(oneClickFindings, f.ID) {
				return AssertionResult{Reason: f.Message, Actual: "absent"}
			}
		}
	}
	return AssertionResult{Pass: true, Actual: "present"}
}

// gradeRank is the position of a grade, best first; -1 when unknown.
func gradeRank(g string) int {
	for i, t := range GradeThresholds {
		if t.Grade == g {
			return i
		}
	}
	if g == "F" {
		return len(GradeThresholds)
	}
	return -1
}

func checkGrade(got, want string) AssertionResult {
	want = strings.ToUpper(strings.TrimSpace(want))
	w := gradeRank(want)
	if w < 0 {
		return AssertionResult{Reason: fmt.Sprintf("value must be a grade A, B, C, D or F, not %q", truncate(want, 20)), Actual: got}
	}
	if g := gradeRank(got); g >= 0 && g <= w {
		return AssertionResult{Pass: true, Actual: got}
	}
	return AssertionResult{Reason: "the grade is " + got + ", below " + want, Actual: got}
}

func checkHeader(hs []HeaderField, a Assertion) AssertionResult {
	name := strings.TrimSpace(a.Name)
	if name == "" {
		return AssertionResult{Reason: "name (the header field name) is required"}
	}
	var values []string
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			values = append(values, h.Value)
		}
	}
	actual := strings.Join(values, "\n")
	if a.Type == AssertHeaderAbsent {
		if len(values) == 0 {
			return AssertionResult{Pass: true}
		}
		return AssertionResult{Reason: fmt.Sprintf("the message has %d %s field(s)", len(values), name), Actual: actual}
	}
	if len(values) == 0 {
		return AssertionResult{Reason: "the message has no " + name + " field"}
	}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if (a.Type == AssertHeaderEquals && v == a.Value) || (a.Type == AssertHeaderContains && strings.Contains(v, a.Value)) {
			return AssertionResult{Pass: true, Actual: v}
		}
	}
	if a.Type == AssertHeaderEquals {
		return AssertionResult{Reason: fmt.Sprintf("no %s field equals %q", name, a.Value), Actual: actual}
	}
	return AssertionResult{Reason: fmt.Sprintf("no %s field contains %q", name, a.Value), Actual: actual}
}

func checkCount(s Subject, a Assertion) AssertionResult {
	what, got := "the message has %d link(s)", s.Links
	if a.Type == AssertSizeAtMost {
		what, got = "the message is %d bytes", s.Size
	}
	actual := strconv.Itoa(got)
	if a.Limit == nil {
		return AssertionResult{Reason: "limit is required", Actual: actual}
	}
	n := *a.Limit
	ok := float64(got) <= n
	if a.Type == AssertLinkCountAtLeast {
		ok = float64(got) >= n
	}
	if ok {
		return AssertionResult{Pass: true, Actual: actual}
	}
	bound := "at most"
	if a.Type == AssertLinkCountAtLeast {
		bound = "at least"
	}
	return AssertionResult{Reason: fmt.Sprintf(what+", not %s %s", got, bound, strconv.FormatFloat(n, 'f', -1, 64)), Actual: actual}
}
