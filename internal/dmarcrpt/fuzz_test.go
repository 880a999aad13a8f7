package dmarcrpt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
)

// seedFromCorpus adds every file under a corpus folder to the fuzz corpus.
func seedFromCorpus(f *testing.F, rel string) {
	dir := corpus.Path(f, rel)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) == ".md" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(b)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
}

// FuzzParseFile checks that ParseFile never panics on any input and that a
// report it accepts keeps its invariants.
//
//	go test -fuzz FuzzParseFile ./internal/dmarcrpt
func FuzzParseFile(f *testing.F) {
	seedFromCorpus(f, "dmarc")
	f.Fuzz(func(t *testing.T, data []byte) {
		fb, _, err := dmarcrpt.ParseFile(data)
		if err != nil {
			return
		}
		if fb.PolicyPublished.Domain == "" {
			t.Fatal("accepted a report without a domain")
		}
		for _, r := range fb.Records {
			// The disposition is the reporter's word, trimmed, without
			// ASCII upper case.
			if r.Count < 0 || r.Disposition != strings.TrimSpace(r.Disposition) || strings.ContainsAny(r.Disposition, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				t.Fatalf("bad record %+v", r)
			}
		}
	})
}
