package tlsrpt_test

import (
	"bytes"
	"compress/gzip"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/reportmail"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

var (
	successRe = regexp.MustCompile(`"total-successful-session-count"\s*:\s*(\d+)`)
	failureRe = regexp.MustCompile(`"total-failure-session-count"\s*:\s*(\d+)`)
)

func sum(t *testing.T, re *regexp.Regexp, b []byte) int64 {
	var n int64
	for _, m := range re.FindAllSubmatch(b, -1) {
		v, err := strconv.ParseInt(string(m[1]), 10, 64)
		require.NoError(t, err)
		n += v
	}
	return n
}

// TestCorpusWalk parses every file of corpus/tls-rpt; session totals are
// checked against the JSON read independently.
func TestCorpusWalk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file   string
		format tlsrpt.Format
		domain string
	}{
		{"rfc8460.json", tlsrpt.FormatJSON, "company-y.example"},
		{"smtp_tls.json", tlsrpt.FormatJSON, "example.com"},
		{"mail.ru.json", tlsrpt.FormatJSON, "example.com"},
		{"google.com_smtp_tls_report.eml", tlsrpt.FormatEmail, "cardinalhealth.ca"},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			data := corpus.Read(t, "tls-rpt/"+c.file)
			r, format, err := tlsrpt.ParseFile(data)
			require.NoError(t, err)
			require.Equal(t, c.format, format)
			require.Equal(t, c.domain, r.Policies[0].Policy.Domain)
			require.NotEmpty(t, r.ReportID)
			if format == tlsrpt.FormatJSON {
				ok, failed := r.Totals()
				require.Equal(t, sum(t, successRe, data), ok)
				require.Equal(t, sum(t, failureRe, data), failed)
			}
		})
	}
}

func TestDetails(t *testing.T) {
	t.Parallel()
	r, _, err := tlsrpt.ParseFile(corpus.Read(t, "tls-rpt/rfc8460.json"))
	require.NoError(t, err)
	p := r.Policies[0]
	require.Equal(t, "sts", p.Policy.Type)
	require.Equal(t, tlsrpt.StringList{"*.mail.company-y.example"}, p.Policy.MXHost, "a single string is a list of one")
	require.Len(t, p.FailureDetails, 3)
	require.Equal(t, "starttls-not-supported", p.FailureDetails[1].ResultType)
	require.Equal(t, int64(200), p.FailureDetails[1].FailedSessionCount)

	// The gzip form of the same JSON is the same report.
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(corpus.Read(t, "tls-rpt/rfc8460.json"))
	require.NoError(t, w.Close())
	buf.WriteString("\r\n")
	again, format, err := tlsrpt.ParseFile(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, tlsrpt.FormatGzip, format)
	require.Equal(t, r, again)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		data string
		want error
	}{
		{"Empty", "", tlsrpt.ErrEmpty},
		{"NotJSON", "{nope", tlsrpt.ErrMalformed},
		{"NoReportID", `{"date-range":{"start-datetime":"2024-01-01T00:00:00Z","end-datetime":"2024-01-02T00:00:00Z"},"policies":[{}]}`, tlsrpt.ErrInvalid},
		{"NoPolicies", `{"report-id":"x","date-range":{"start-datetime":"2024-01-01T00:00:00Z","end-datetime":"2024-01-02T00:00:00Z"}}`, tlsrpt.ErrInvalid},
		{"NegativeCount", `{"report-id":"x","date-range":{"start-datetime":"2024-01-01T00:00:00Z","end-datetime":"2024-01-02T00:00:00Z"},"policies":[{"summary":{"total-failure-session-count":-1}}]}`, tlsrpt.ErrInvalid},
		{"EmailWithoutReport", "From: a@example.com\r\n\r\nhello\r\n", tlsrpt.ErrNoReport},
		{"Binary", "\x00\x01", reportmail.ErrNotMIME},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tlsrpt.ParseFile([]byte(c.data))
			require.ErrorIs(t, err, c.want)
		})
	}
}
