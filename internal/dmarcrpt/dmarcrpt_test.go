package dmarcrpt_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
	"github.com/mailwatch/mailwatch/internal/reportmail"
)

func parse(t *testing.T, file string) *dmarcrpt.Feedback {
	t.Helper()
	f, _, err := dmarcrpt.ParseFile(corpus.Read(t, "dmarc/"+file))
	require.NoError(t, err)
	return f
}

func TestWrappersYieldTheSameReport(t *testing.T) {
	t.Parallel()
	nice := parse(t, "extract_report/nice-input.xml")
	require.Equal(t, nice, parse(t, "extract_report/nice-input.xml.gz"))
	require.Equal(t, nice, parse(t, "extract_report/nice-input.xml.zip"))
	require.NotEqual(t, nice, parse(t, "extract_report/changed-input.xml"))
}

func TestQuirks(t *testing.T) {
	t.Parallel()

	t.Run("LargeReport", func(t *testing.T) {
		f := parse(t, "!large-example.com!1711897200!1711983600.xml")
		require.Len(t, f.Records, 2286)
	})
	t.Run("EmptyOrgName", func(t *testing.T) {
		f := parse(t, "!example.com!1538204542!1538463818.xml")
		require.Empty(t, f.ReportMetadata.OrgName)
		require.NotEmpty(t, f.ReportMetadata.ReportID)
	})
	t.Run("UnclosedOuterElement", func(t *testing.T) {
		f := parse(t, "ikea.com!example.de!1538690400!1538776800.xml")
		require.Equal(t, "example.de", f.PolicyPublished.Domain)
		require.Equal(t, "ikea.com", f.ReportMetadata.OrgName)
	})
	t.Run("UnescapedLessThan", func(t *testing.T) {
		f := parse(t, "invalid_xml.xml")
		require.Equal(t, "<bad-xml@bad-xml.net>", f.ReportMetadata.Email)
		require.Equal(t, "bad<xml.net", f.Records[0].HeaderFrom)
	})
	t.Run("UpperCaseWords", func(t *testing.T) {
		f := parse(t, "aggregate_invalid/report_with_upper_cased_pass.xml")
		r := f.Records[0]
		require.Equal(t, []string{"none", "pass", "pass"}, []string{r.Disposition, r.DKIM, r.SPF})
		require.Equal(t, "example.com", f.ReportMetadata.OrgName, "trailing space trimmed")
	})
	t.Run("RFC9990Fields", func(t *testing.T) {
		f := parse(t, "rfc9990-example.net!example.com!1700000000!1700086399.xml")
		require.Equal(t, "2.0", f.Version)
		require.Equal(t, "reject", f.PolicyPublished.NP)
		require.Equal(t, "y", f.PolicyPublished.Testing)
		require.Equal(t, "treewalk", f.PolicyPublished.DiscoveryMethod)
		require.Equal(t, time.Unix(1700000000, 0).UTC(), f.ReportMetadata.Begin)
	})
	t.Run("RFC9990NamespaceAndPassDisposition", func(t *testing.T) {
		f := parse(t, "rfc9990-sample.xml")
		require.Equal(t, "Example DMARC Aggregate Reporter v1.2", f.ReportMetadata.Generator)
		require.Nil(t, f.PolicyPublished.Pct)
		r := f.Records[0]
		require.Equal(t, dmarcrpt.DispositionPass, r.Disposition, "kept as reported")
		require.Equal(t, int64(123), r.Count)
		require.Equal(t, "abc123", r.DKIMResults[0].Selector)
	})
	t.Run("DMARCbisDispositions", func(t *testing.T) {
		// RFC 9990 reports write "pass" for messages that passed DMARC; the
		// word is the reporter's and is kept, never folded into "none",
		// which reports a failing message let through.
		data, err := os.ReadFile("testdata/dmarcbis-pass-disposition.xml")
		require.NoError(t, err)
		f, format, err := dmarcrpt.ParseFile(data)
		require.NoError(t, err)
		require.Equal(t, dmarcrpt.FormatXML, format)
		var got []string
		for _, r := range f.Records {
			got = append(got, r.Disposition)
		}
		require.Equal(t, []string{dmarcrpt.DispositionPass, dmarcrpt.DispositionPass, dmarcrpt.DispositionReject, dmarcrpt.DispositionNone}, got,
			"the second record's upper-case Pass is lower-cased like every result word")
		require.Equal(t, []dmarcrpt.Reason{{Type: "local_policy", Comment: "mailing list"}}, f.Records[3].Reasons)
		require.Equal(t, "treewalk", f.PolicyPublished.DiscoveryMethod)
		require.Equal(t, int64(50), f.MessageCount())
	})
	t.Run("EmptyReasons", func(t *testing.T) {
		f := parse(t, "empty_reason.xml")
		for _, r := range f.Records {
			for _, reason := range r.Reasons {
				require.True(t, reason.Type != "" || reason.Comment != "")
			}
		}
	})
	t.Run("GzipWithTrailingBytes", func(t *testing.T) {
		f := parse(t, "mimecast-weird-gzip.eml")
		require.NotEmpty(t, f.Records)
	})
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func zipOf(t *testing.T, files map[string][]byte) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, b := range files {
		f, err := w.Create(name)
		require.NoError(t, err)
		_, err = f.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	xml := corpus.Read(t, "dmarc/extract_report/nice-input.xml")
	huge := make([]byte, dmarcrpt.MaxReportBytes+1)

	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"Empty", []byte(" \n"), dmarcrpt.ErrEmpty},
		{"NoFeedback", []byte("<html><body/></html>"), dmarcrpt.ErrNoFeedback},
		{"NotXMLAtAll", []byte("<<<<"), dmarcrpt.ErrMalformed},
		{"GzipBomb", gz(t, huge), reportmail.ErrDecompressedTooLarge},
		{"ZipBomb", zipOf(t, map[string][]byte{"r.xml": huge}), reportmail.ErrDecompressedTooLarge},
		{"ZipTwoFiles", zipOf(t, map[string][]byte{"a.xml": xml, "b.xml": xml}), reportmail.ErrBadArchive},
		{"ZipEmpty", zipOf(t, nil), reportmail.ErrBadArchive},
		{"TruncatedGzip", gz(t, xml)[:100], reportmail.ErrBadArchive},
		{"YahooUnused", gz(t, []byte("unused")), dmarcrpt.ErrNoFeedback},
		{"MissingDomain", []byte("<feedback><report_metadata><date_range><begin>1</begin><end>2</end></date_range></report_metadata></feedback>"), dmarcrpt.ErrInvalid},
		{"BadCount", []byte("<feedback><report_metadata><date_range><begin>1</begin><end>2</end></date_range></report_metadata><policy_published><domain>a.example</domain></policy_published><record><row><count>many</count></row></record></feedback>"), dmarcrpt.ErrInvalid},
		{"DeepWrapping", bytes.Repeat([]byte("<a>"), 100), dmarcrpt.ErrNoFeedback},
		{"EmailWithoutReport", []byte("From: a@example.com\r\nSubject: hi\r\nContent-Type: text/plain\r\n\r\nhello\r\n"), dmarcrpt.ErrNoReport},
		{"NeitherXMLNorEmail", []byte("\x00\x01binary"), reportmail.ErrNotMIME},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := dmarcrpt.ParseFile(c.data)
			require.ErrorIs(t, err, c.want)
		})
	}
}

// TestFirstReportPartDecides: once a part is recognised as a report, its
// outcome is the message's, so a message of many decompressing parts costs
// one decompression, not one per part. Here the first gzip part is broken
// and the second is a good report: the second must not be tried.
func TestFirstReportPartDecides(t *testing.T) {
	t.Parallel()
	good := corpus.Read(t, "dmarc/extract_report/nice-input.xml.gz")
	broken := append([]byte(nil), good[:len(good)/2]...)
	var msg bytes.Buffer
	msg.WriteString("From: r@example.net\r\nTo: dmarc@example.com\r\nSubject: report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i, part := range [][]byte{broken, good} {
		msg.WriteString("--b\r\nContent-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n" +
			"Content-Disposition: attachment; filename=r" + string(rune('0'+i)) + ".xml.gz\r\n\r\n")
		msg.WriteString(base64.StdEncoding.EncodeToString(part) + "\r\n")
	}
	msg.WriteString("--b--\r\n")
	_, err := dmarcrpt.ParseMessage(msg.Bytes())
	require.Error(t, err, "the broken first report part decides the message")
}
