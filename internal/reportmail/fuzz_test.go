package reportmail_test

import (
	"testing"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/reportmail"
)

// FuzzParse checks that Parse never panics and never returns more parts
// than its bound.
//
//	go test -fuzz FuzzParse ./internal/reportmail
func FuzzParse(f *testing.F) {
	for _, rel := range []string{"dmarc/twilight.eml", "dmarc/mimecast-weird-gzip.eml", "tls-rpt/google.com_smtp_tls_report.eml",
		"dmarc-forensic/[Netease DMARC Failure Report] Rent Reminder.eml"} {
		f.Add(corpus.Read(f, rel))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := reportmail.Parse(raw)
		if err != nil {
			return
		}
		if len(m.Parts) > reportmail.MaxParts {
			t.Fatal("more parts than the bound")
		}
	})
}
