package dmarcrpt_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
)

// corpusFiles lists every file of corpus/dmarc with the form it comes in.
var corpusFiles = []struct {
	file   string
	format dmarcrpt.Format
}{
	{"!example.com!1538204542!1538463818.xml", dmarcrpt.FormatXML},
	{"!large-example.com!1711897200!1711983600.xml", dmarcrpt.FormatXML},
	{"Report domain- borschow.com Submitter- google.com Report-ID- 949348866075514174.eml", dmarcrpt.FormatEmail},
	{"addisonfoods.com!example.com!1536105600!1536191999.xml", dmarcrpt.FormatXML},
	{"empty_reason.xml", dmarcrpt.FormatXML},
	{"estadocuenta1.infonacot.gob.mx!example.com!1536853302!1536939702!2940.xml.zip", dmarcrpt.FormatZip},
	{"example.net!example.com!1529366400!1529452799.xml", dmarcrpt.FormatXML},
	{"fastmail.com!example.com!1516060800!1516147199!102675056.xml.gz", dmarcrpt.FormatGzip},
	{"ikea.com!example.de!1538690400!1538776800.xml", dmarcrpt.FormatXML},
	{"invalid_utf_8.xml", dmarcrpt.FormatXML},
	{"invalid_xml.xml", dmarcrpt.FormatXML},
	{"mimecast-weird-gzip.eml", dmarcrpt.FormatEmail},
	{"old_draft_from_wiki.xml", dmarcrpt.FormatXML},
	{"protection.outlook.com!example.com!1711756800!1711843200.xml", dmarcrpt.FormatXML},
	{"rfc9990-example.net!example.com!1700000000!1700086399.xml", dmarcrpt.FormatXML},
	{"rfc9990-sample.xml", dmarcrpt.FormatXML},
	{"twilight.eml", dmarcrpt.FormatEmail},
	{"usssa.com!example.com!1538784000!1538870399.xml", dmarcrpt.FormatXML},
	{"veeam.com!example.com!1530133200!1530219600.xml", dmarcrpt.FormatXML},
	{"aggregate_invalid/report_with_upper_cased_pass.xml", dmarcrpt.FormatXML},
	{"extract_report/nice-input.xml", dmarcrpt.FormatXML},
	{"extract_report/nice-input.xml.gz", dmarcrpt.FormatGzip},
	{"extract_report/nice-input.xml.zip", dmarcrpt.FormatZip},
	{"extract_report/changed-input.xml", dmarcrpt.FormatXML},
}

var (
	recordRe = regexp.MustCompile(`<record>`)
	countRe  = regexp.MustCompile(`<count>\s*(\d+)\s*</count>`)
)

// countsFromXML counts records and messages with regular expressions, a
// method independent of the parser under test.
func countsFromXML(t *testing.T, xml []byte) (int, int64) {
	t.Helper()
	var total int64
	for _, m := range countRe.FindAllSubmatch(xml, -1) {
		n, err := strconv.ParseInt(string(m[1]), 10, 64)
		require.NoError(t, err)
		total += n
	}
	return len(recordRe.FindAll(xml, -1)), total
}

// TestCorpusWalk parses every file of corpus/dmarc as its README says:
// each yields a report, with the records and messages its XML holds, except
// empty.xml, which fails with a clear error.
func TestCorpusWalk(t *testing.T) {
	t.Parallel()
	dir := corpus.Path(t, "dmarc")
	seen := map[string]bool{"README.md": true, "empty.xml": true}
	for _, c := range corpusFiles {
		seen[c.file] = true
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			data := corpus.Read(t, "dmarc/"+c.file)
			f, format, err := dmarcrpt.ParseFile(data)
			require.NoError(t, err)
			require.Equal(t, c.format, format)
			require.NotEmpty(t, f.PolicyPublished.Domain)
			require.NotEmpty(t, f.Records)
			if c.format == dmarcrpt.FormatXML {
				records, messages := countsFromXML(t, data)
				require.Len(t, f.Records, records)
				require.Equal(t, messages, f.MessageCount())
			}
			for _, r := range f.Records {
				for _, w := range []string{r.Disposition, r.DKIM, r.SPF} {
					require.Equal(t, strings.ToLower(w), w, "result words are lower case")
				}
			}
		})
	}
	// Every file of the folder is covered by the table above.
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		require.True(t, seen[filepath.ToSlash(rel)], "corpus file %s has no expectation", rel)
		return nil
	})
	require.NoError(t, err)

	t.Run("empty.xml", func(t *testing.T) {
		t.Parallel()
		_, _, err := dmarcrpt.ParseFile(corpus.Read(t, "dmarc/empty.xml"))
		require.ErrorIs(t, err, dmarcrpt.ErrEmpty)
	})
}
