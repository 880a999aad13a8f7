package deliverability_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
)

// fixedFilter answers every check with res or err.
type fixedFilter struct {
	res spamcheck.Result
	err error
	env spamcheck.Envelope
}

func (f *fixedFilter) Check(_ context.Context, _ []byte, env spamcheck.Envelope) (spamcheck.Result, error) {
	f.env = env
	return f.res, f.err
}

func analyzeWithSpam(t *testing.T, raw []byte, c spamcheck.Checker) *deliverability.Report {
	t.Helper()
	_, r := setup(t)
	return deliverability.Analyze(context.Background(), r, raw, session("bounce@sender.test"), deliverability.Options{Spam: c})
}

// The filter's verdict becomes the spam section: a score at or over the
// threshold costs spam_score_high, over half of it spam_score_elevated,
// and a filter that could not score the message leaves the grade alone.
func TestAnalyzeSpamSection(t *testing.T) {
	t.Parallel()
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rules := []spamcheck.Rule{{Name: "URI_SHORTENER", Points: 2.5}, {Name: "HTML_IMAGE_RATIO", Points: 1.1}, {Name: "DKIM_VALID", Points: -0.1}}

	f := &fixedFilter{res: spamcheck.Result{Engine: "spamassassin", Score: 3.6, Threshold: 5, Rules: rules}}
	rep := analyzeWithSpam(t, raw, f)
	require.Equal(t, "127.0.0.1", f.env.ClientIP.String(), "the session reaches the filter")
	require.Equal(t, "mail.sender.test", f.env.Helo)
	require.Equal(t, "bounce@sender.test", f.env.MailFrom)
	require.NotNil(t, rep.Spam)
	require.InDelta(t, 3.6, rep.Spam.Score, 1e-9)
	require.Equal(t, []string{"spam_score_elevated"}, ids(rep)["spam"])
	elevated := rep.Score
	require.Contains(t, rep.Sections[2].Findings[0].Message, "SpamAssassin scores the message 3.6 (its spam threshold is 5.0); heaviest rules: URI_SHORTENER +2.5, HTML_IMAGE_RATIO +1.1")

	f.res.Score, f.res.Spam = 7.2, true
	rep = analyzeWithSpam(t, raw, f)
	require.Equal(t, []string{"spam_score_high"}, ids(rep)["spam"])
	require.Less(t, rep.Score, elevated)

	f.res = spamcheck.Result{Engine: "rspamd", Score: 1, Threshold: 15, Rules: []spamcheck.Rule{}}
	rep = analyzeWithSpam(t, raw, f)
	require.Empty(t, ids(rep)["spam"], "well under the threshold: nothing to fix")
	require.Equal(t, 100, rep.Score)

	f.err = errors.New("spamd: connection refused")
	rep = analyzeWithSpam(t, raw, f)
	require.Nil(t, rep.Spam)
	require.Equal(t, []string{"spam_not_scored"}, ids(rep)["spam"])
	require.True(t, rep.Sections[2].Skipped)
	require.Contains(t, rep.Sections[2].Note, "did not answer")
	require.NotContains(t, rep.Sections[2].Note, "connection refused", "the operator's error stays out of the customer's report")
	require.Equal(t, 100, rep.Score, "an unknown score costs nothing")
}

// Through a real spamd (scripts/test starts one on a Unix socket): the
// standard GTUBE message is spam and lowers the grade; the clean message
// is scored below the threshold.
func TestAnalyzeSpamdGTUBE(t *testing.T) {
	t.Parallel()
	addr := os.Getenv("SPAMD_TEST_ADDR")
	if addr == "" {
		if os.Getenv("SPAM_TEST_REQUIRED") == "1" {
			t.Fatal("SPAM_TEST_REQUIRED=1 but SPAMD_TEST_ADDR is not set: scripts/test starts spamd")
		}
		t.Skip("SPAMD_TEST_ADDR not set: no spamd (scripts/test starts one)")
	}
	c := &spamcheck.Spamd{Addr: addr}
	clean := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rep := analyzeWithSpam(t, clean, c)
	require.NotNil(t, rep.Spam, "%+v", rep.Sections[2])
	require.False(t, rep.Spam.Spam)
	require.Less(t, rep.Spam.Score, rep.Spam.Threshold)

	m := goodMail()
	m.body = strings.Replace(m.body, "Thanks, the Sender team.", "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X", 1)
	spam := sign(t, m.bytes(), "sender.test", signedHeaders)
	rep2 := analyzeWithSpam(t, spam, c)
	require.NotNil(t, rep2.Spam)
	require.True(t, rep2.Spam.Spam)
	require.Greater(t, rep2.Spam.Score, 100.0)
	require.Equal(t, "GTUBE", rep2.Spam.Rules[0].Name)
	require.Equal(t, []string{"spam_score_high"}, ids(rep2)["spam"])
	require.Less(t, rep2.Score, rep.Score)
}
