package dmarcrpt

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html/charset"

	"github.com/mailwatch/mailwatch/internal/corpus"
)

// decodeReflect is the former decode: xml.Decoder.DecodeElement into
// xmlFeedback, kept as the oracle of the streaming decoder.
//
// It finds the first <feedback> element, at most maxOuterDepth
// elements deep, and decodes it; anything after it is ignored.
func decodeReflect(data []byte) (*xmlFeedback, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = charset.NewReaderLabel
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, ErrNoFeedback
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "feedback" {
				var raw xmlFeedback
				if err := d.DecodeElement(&raw, &t); err != nil {
					return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
				}
				return &raw, nil
			}
			depth++
			if depth > maxOuterDepth {
				return nil, fmt.Errorf("%w: nested more than %d elements deep", ErrNoFeedback, maxOuterDepth)
			}
		case xml.EndElement:
			depth--
		}
	}
}

// checkSameDecode asserts that the streaming decoder reads data as
// Unmarshal does: the same fields, or both an error.
func checkSameDecode(t *testing.T, data []byte) {
	t.Helper()
	for _, in := range [][]byte{data, repair(data)} {
		got, err := decode(in)
		want, errWant := decodeReflect(in)
		if errWant != nil {
			require.Error(t, err, "Unmarshal refused it: %v", errWant)
			require.Equal(t, errors.Is(errWant, ErrNoFeedback), errors.Is(err, ErrNoFeedback), "%v / %v", err, errWant)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestDecodeMatchesUnmarshal: every aggregate report of the corpus decodes
// as it did through encoding/xml's Unmarshal.
func TestDecodeMatchesUnmarshal(t *testing.T) {
	dir := corpus.Path(t, "dmarc")
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".xml" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		t.Run(filepath.Base(p), func(t *testing.T) { checkSameDecode(t, data) })
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, n, 10)
}

// FuzzDecodeMatchesUnmarshal checks the streaming decoder against
// Unmarshal on any input.
//
//	go test -fuzz FuzzDecodeMatchesUnmarshal ./internal/dmarcrpt
func FuzzDecodeMatchesUnmarshal(f *testing.F) {
	dir := corpus.Path(f, "dmarc")
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".xml" {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	f.Add([]byte("<feedback><record><row><count>1</count><count>2</count></row></record><record/></feedback>"))
	f.Add([]byte("<a><b><feedback><version>1<x>y</x>2</version></feedback>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		checkSameDecode(t, data)
	})
}
