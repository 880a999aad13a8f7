package dmarcrpt_test

import (
	"testing"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dmarcrpt"
)

// BenchmarkParseLarge parses the corpus's 2,286-record report.
//
//	go test -run '^$' -bench ParseLarge -benchmem ./internal/dmarcrpt
func BenchmarkParseLarge(b *testing.B) {
	data := corpus.Read(b, "dmarc/!large-example.com!1711897200!1711983600.xml")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := dmarcrpt.Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Records) != 2286 {
			b.Fatalf("%d records", len(f.Records))
		}
	}
}
