package deliverability_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
	"github.com/mailwatch/mailwatch/internal/spf"
)

func limit(n float64) *float64 { return &n }

func TestCheckAssertions(t *testing.T) {
	t.Parallel()
	rep := &deliverability.Report{
		Grade: "B", Score: 85,
		Session: deliverability.Session{ClientIP: netip.MustParseAddr("192.0.2.7")},
		Auth: deliverability.Authentication{
			SPF:   spf.Result{Status: spf.Pass},
			DKIM:  []deliverability.Signature{{Result: "fail"}, {Result: "pass"}},
			DMARC: dmarc.Verdict{Result: "fail"},
		},
		Sections: []deliverability.Section{
			{Name: deliverability.SectionReputation, Skipped: true, Note: "no blocklist catalog is configured"},
			{Name: deliverability.SectionHeaders, Findings: []deliverability.Finding{{ID: "one_click_missing", Message: "no List-Unsubscribe-Post"}}},
		},
	}
	s := deliverability.Subject{
		Report: rep, Links: 3, Size: 2048,
		Headers: []deliverability.HeaderField{{Name: "Subject", Value: "Welcome aboard"}, {Name: "X-Tag", Value: " a "}, {Name: "x-tag", Value: "b"}},
	}
	cases := []struct {
		a      deliverability.Assertion
		pass   bool
		reason string
		actual string
	}{
		{deliverability.Assertion{Type: "spf_pass"}, true, "", "pass"},
		{deliverability.Assertion{Type: "dkim_pass"}, true, "", "pass"},
		{deliverability.Assertion{Type: "dmarc_pass"}, false, "DMARC is fail, not pass", "fail"},
		{deliverability.Assertion{Type: "spam_score_at_most", Limit: limit(5)}, false, "no spam score", "unknown"},
		{deliverability.Assertion{Type: "not_blocklisted"}, false, "the blocklist check did not run", "unknown"},
		{deliverability.Assertion{Type: "header_equals", Name: "subject", Value: "Welcome aboard"}, true, "", "Welcome aboard"},
		{deliverability.Assertion{Type: "header_equals", Name: "Subject", Value: "Welcome"}, false, `no Subject field equals "Welcome"`, "Welcome aboard"},
		{deliverability.Assertion{Type: "header_contains", Name: "X-Tag", Value: "b"}, true, "", "b"},
		{deliverability.Assertion{Type: "header_contains", Name: "X-Other", Value: "b"}, false, "the message has no X-Other field", ""},
		{deliverability.Assertion{Type: "header_absent", Name: "X-Other"}, true, "", ""},
		{deliverability.Assertion{Type: "header_absent", Name: "X-Tag"}, false, "the message has 2 X-Tag field(s)", " a \nb"},
		{deliverability.Assertion{Type: "header_absent"}, false, "name (the header field name) is required", ""},
		{deliverability.Assertion{Type: "one_click_unsubscribe"}, false, "no List-Unsubscribe-Post", "absent"},
		{deliverability.Assertion{Type: "link_count_at_most", Limit: limit(3)}, true, "", "3"},
		{deliverability.Assertion{Type: "link_count_at_least", Limit: limit(4)}, false, "the message has 3 link(s), not at least 4", "3"},
		{deliverability.Assertion{Type: "size_at_most", Limit: limit(1000)}, false, "the message is 2048 bytes, not at most 1000", "2048"},
		{deliverability.Assertion{Type: "size_at_most"}, false, "limit is required", "2048"},
		{deliverability.Assertion{Type: "grade_at_least", Value: "b"}, true, "", "B"},
		{deliverability.Assertion{Type: "grade_at_least", Value: "A"}, false, "the grade is B, below A", "B"},
		{deliverability.Assertion{Type: "grade_at_least", Value: "Z"}, false, `value must be a grade A, B, C, D or F, not "Z"`, "B"},
		{deliverability.Assertion{Type: "is_lovely"}, false, `unknown assertion type "is_lovely"`, ""},
	}
	for _, c := range cases {
		pass, res := deliverability.Check(s, []deliverability.Assertion{c.a})
		require.Len(t, res, 1)
		r := res[0]
		require.Equal(t, c.a.Type, r.Type)
		require.Equal(t, c.pass, pass, "%+v: %+v", c.a, r)
		require.Equal(t, c.pass, r.Pass, "%+v", c.a)
		require.True(t, strings.HasPrefix(r.Reason, c.reason), "%+v: reason %q", c.a, r.Reason)
		require.Equal(t, c.pass, r.Reason == "", "%+v: a reason exactly when it fails", c.a)
		require.Equal(t, c.actual, r.Actual, "%+v", c.a)
	}

	// With the content filter's score: at most the limit passes, over it
	// fails with both numbers.
	s.Report.Spam = &spamcheck.Result{Engine: "spamassassin", Score: 3.2, Threshold: 5}
	pass, res := deliverability.Check(s, []deliverability.Assertion{{Type: "spam_score_at_most", Limit: limit(5)}})
	require.True(t, pass, "%+v", res)
	require.Equal(t, "3.2", res[0].Actual)
	pass, res = deliverability.Check(s, []deliverability.Assertion{{Type: "spam_score_at_most", Limit: limit(2.5)}})
	require.False(t, pass)
	require.Equal(t, "the spam score is 3.2, not at most 2.5", res[0].Reason)
	s.Report.Spam = nil

	// All must pass for pass; order is kept.
	pass, res = deliverability.Check(s, []deliverability.Assertion{{Type: "spf_pass"}, {Type: "dmarc_pass"}})
	require.False(t, pass)
	require.Equal(t, []string{"spf_pass", "dmarc_pass"}, []string{res[0].Type, res[1].Type})

	// Listed on a blocklist; one-click present.
	rep.Sections = []deliverability.Section{{Name: deliverability.SectionReputation}, {Name: deliverability.SectionHeaders}}
	rep.Listings = []deliverability.Listing{{List: "zen.example"}}
	_, res = deliverability.Check(s, []deliverability.Assertion{{Type: "not_blocklisted"}, {Type: "one_click_unsubscribe"}})
	require.Equal(t, "192.0.2.7 is listed on zen.example", res[0].Reason)
	require.True(t, res[1].Pass)
	rep.Listings = []deliverability.Listing{{List: "pbl.example", Informational: true}}
	_, res = deliverability.Check(s, []deliverability.Assertion{{Type: "not_blocklisted"}})
	require.True(t, res[0].Pass, "a policy listing is not a listing for abuse")
	rep.Listings = nil
	_, res = deliverability.Check(s, []deliverability.Assertion{{Type: "not_blocklisted"}})
	require.True(t, res[0].Pass)

	// Without a report, the report's assertions fail with the reason; the
	// message's own facts are still judged.
	s = deliverability.Subject{NoReport: "the analysis is still pending", Links: 1}
	_, res = deliverability.Check(s, []deliverability.Assertion{{Type: "grade_at_least", Value: "C"}, {Type: "link_count_at_least", Limit: limit(1)}})
	require.Equal(t, "the message has no analysis: the analysis is still pending", res[0].Reason)
	require.True(t, res[1].Pass)
}

func TestVerdicts(t *testing.T) {
	t.Parallel()
	a := deliverability.Authentication{SPF: spf.Result{Status: spf.Softfail}, DMARC: dmarc.Verdict{Result: "none"}}
	require.Equal(t, deliverability.Verdicts{SPF: "softfail", DKIM: "none", DMARC: "none"}, a.Verdicts())
	a.DKIM = []deliverability.Signature{{Result: "temperror"}, {Result: "fail"}}
	require.Equal(t, "fail", a.Verdicts().DKIM)
	a.DKIM = []deliverability.Signature{{Result: "temperror"}, {Result: "policy"}}
	require.Equal(t, "temperror", a.Verdicts().DKIM)
	a.DKIM = append(a.DKIM, deliverability.Signature{Result: "pass"})
	require.Equal(t, "pass", a.Verdicts().DKIM)
}

// FuzzCheck: assertions are outside input; whatever they hold, Check
// answers one result per assertion, a reason exactly when it fails, and a
// bounded actual value.
func FuzzCheck(f *testing.F) {
	f.Add("header_equals", "Subject", "hi", 1.0, "Subject", "hi")
	f.Add("header_contains", "x-a", "", -1.0, "X-A", strings.Repeat("v", 3000))
	f.Add("grade_at_least", "", "b", 0.0, "", "")
	f.Add("link_count_at_least", "", "", 3.0, "a", "b")
	f.Add("\x00", "\xff", "\xfe", 1e300, "\x00", "\x00")
	rep := &deliverability.Report{Grade: "C", Sections: []deliverability.Section{{Name: deliverability.SectionReputation, Skipped: true, Note: "n"}}}
	f.Fuzz(func(t *testing.T, typ, name, value string, lim float64, hname, hvalue string) {
		for _, r := range []*deliverability.Report{rep, nil} {
			s := deliverability.Subject{Report: r, NoReport: "none", Links: 2, Size: 10,
				Headers: []deliverability.HeaderField{{Name: hname, Value: hvalue}}}
			as := []deliverability.Assertion{{Type: typ, Name: name, Value: value, Limit: &lim}, {Type: typ, Name: name, Value: value}}
			pass, res := deliverability.Check(s, as)
			require.Len(t, res, len(as))
			all := true
			for _, x := range res {
				require.Equal(t, typ, x.Type)
				require.Equal(t, !x.Pass, x.Reason != "", "%+v", x)
				require.LessOrEqual(t, len(x.Actual), 1000)
				all = all && x.Pass
			}
			require.Equal(t, all, pass)
		}
	})
}
