package arf_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mailwatch/mailwatch/internal/arf"
	"github.com/mailwatch/mailwatch/internal/corpus"
)

// FuzzParseMessage checks that ParseMessage never panics and keeps every
// field within its bound.
//
//	go test -fuzz FuzzParseMessage ./internal/arf
func FuzzParseMessage(f *testing.F) {
	dir := corpus.Path(f, "dmarc-forensic")
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".eml" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := arf.ParseMessage(raw)
		if err != nil {
			return
		}
		for _, v := range []string{r.AuthenticationResults, r.Subject, r.From, r.SourceIP} {
			if len(v) > 1024 {
				t.Fatal("field over its bound")
			}
		}
	})
}
