package tlsrpt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

// FuzzParseFile checks that ParseFile never panics and that an accepted
// report has an id, a date range and no negative count.
//
//	go test -fuzz FuzzParseFile ./internal/tlsrpt
func FuzzParseFile(f *testing.F) {
	dir := corpus.Path(f, "tls-rpt")
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The HTTPS ingress's check accepts a subset of what ParseFile
		// does (no email wrapper), and the same report.
		if h, _, err := tlsrpt.ParseHTTPS(data); err == nil {
			if r, _, err := tlsrpt.ParseFile(data); err != nil || r.ReportID != h.ReportID || r.OrganizationName != h.OrganizationName {
				t.Fatalf("ParseHTTPS accepted what ParseFile reads otherwise: %v", err)
			}
		}
		r, _, err := tlsrpt.ParseFile(data)
		if err != nil {
			return
		}
		if r.ReportID == "" || r.DateRange.Start.IsZero() {
			t.Fatal("accepted a report without id or range")
		}
		ok, failed := r.Totals()
		if ok < 0 || failed < 0 {
			t.Fatal("negative totals")
		}
	})
}
