package mimelimit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jhillyerd/enmime"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/mimetest"
)

func TestCheck(t *testing.T) {
	t.Parallel()

	t.Run("DeepNestingRefused", func(t *testing.T) {
		t.Parallel()
		raw := mimetest.Nested(10000)
		require.InDelta(t, 727_000, len(raw), 30_000)
		_, err := Check(raw, Default())
		var le *LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, LimitDepth, le.Limit)
		require.Equal(t, int64(DefaultMaxDepth), le.Max)
		require.ErrorIs(t, err, ErrLimit)
		require.Contains(t, err.Error(), "nesting depth is over the limit of 20 levels")
	})

	t.Run("AtTheDepthLimit", func(t *testing.T) {
		t.Parallel()
		shape, err := Check(mimetest.Nested(DefaultMaxDepth), Default())
		require.NoError(t, err)
		require.Equal(t, DefaultMaxDepth, shape.Depth)
		require.Equal(t, DefaultMaxDepth, shape.Parts)
		_, err = Check(mimetest.Nested(DefaultMaxDepth+1), Default())
		require.ErrorIs(t, err, ErrLimit)
	})

	t.Run("PartCount", func(t *testing.T) {
		t.Parallel()
		var b bytes.Buffer
		b.WriteString("Content-Type: multipart/mixed; boundary=x\r\n\r\n")
		for range 11 {
			b.WriteString("--x\r\nContent-Type: text/plain\r\n\r\nhi\r\n")
		}
		b.WriteString("--x--\r\n")
		shape, err := Check(b.Bytes(), Limits{MaxParts: 11})
		require.NoError(t, err)
		require.Equal(t, Shape{Depth: 1, Parts: 11, Work: shape.Work, PartOffsets: shape.PartOffsets}, shape)
		require.Len(t, shape.PartOffsets, 11)
		require.True(t, bytes.HasPrefix(b.Bytes()[shape.PartOffsets[3]:], []byte("--x\r\n")))
		_, err = Check(b.Bytes(), Limits{MaxParts: 10})
		var le *LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, LimitParts, le.Limit)
		require.Contains(t, err.Error(), "part count is over the limit of 10 parts")
	})

	t.Run("Work", func(t *testing.T) {
		t.Parallel()
		// A big body three levels deep is read three times.
		body := strings.Repeat("x", 1000) + "\r\n"
		raw := append(mimetest.Nested(3)[:0:0], mimetest.Nested(3)...)
		raw = bytes.Replace(raw, []byte("hello\r\n"), []byte(strings.Repeat(body, 100)), 1)
		shape, err := Check(raw, Default())
		require.NoError(t, err)
		require.Greater(t, shape.Work, int64(3*100*len(body)))
		_, err = Check(raw, Limits{MaxWork: 3 * 100 * int64(len(body))})
		require.ErrorIs(t, err, ErrLimit)
		require.Contains(t, err.Error(), "too costly")
	})

	t.Run("SinglePartAndOddShapes", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			raw   string
			depth int
		}{
			{"Subject: x\r\n\r\nbody --b\r\n", 0},
			{"Content-Type: text/plain; boundary=b\r\n\r\n--b\r\n", 0},                                              // top level must be multipart
			{"Content-Type: multipart/mixed\r\n\r\n-- \r\n\r\nx\r\n", 1},                                            // no boundary: enmime splits on "--"
			{"Content-Type: multipart/mixed;\r\nboundary=b\r\n\r\n--b\r\nContent-Type: a/b; boundary=c\r\n\r\n", 2}, // unindented continuation; any part with a boundary nests
			{"Content-Type : multipart/mixed; boundary=b\r\n\r\npreamble x--b y\r\n", 1},
		} {
			shape, err := Check([]byte(tc.raw), Default())
			require.NoError(t, err)
			require.Equal(t, tc.depth, shape.Depth, "%q", tc.raw)
		}
	})

	t.Run("Testdata", func(t *testing.T) {
		t.Parallel()
		for _, raw := range seeds(t) {
			_, err := Check(raw, Default())
			require.NoError(t, err)
		}
	})
}

func seeds(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob("../inbound/testdata/*.eml")
	require.NoError(tb, err)
	require.NotEmpty(tb, files)
	// Failure reports by mail (ARF, RFC 6591) from the shared corpus.
	reports, err := filepath.Glob(filepath.Join(corpus.Path(tb, "dmarc-forensic"), "*.eml"))
	require.NoError(tb, err)
	require.NotEmpty(tb, reports)
	files = append(files, reports...)
	var out [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(tb, err)
		out = append(out, raw)
	}
	return out
}

// enmimeDepth is the multipart nesting enmime builds from raw.
func enmimeDepth(raw []byte) (depth, parts int, ok bool) {
	p := enmime.NewParser(enmime.SkipMalformedParts(true), enmime.MultipartWOBoundaryAsSinglePart(true),
		enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy))
	root, err := p.ReadParts(bytes.NewReader(raw))
	if err != nil {
		return 0, 0, false
	}
	var walk func(p *enmime.Part, d int)
	walk = func(p *enmime.Part, d int) {
		if p.FirstChild != nil {
			depth = max(depth, d+1)
		}
		for c := p.FirstChild; c != nil; c = c.NextSibling {
			parts++
			walk(c, d+1)
		}
	}
	walk(root, 0)
	return depth, parts, true
}

// FuzzCheck checks that Check never panics, never under-measures what enmime
// then builds (so its bound holds for the parser behind it), and refuses
// deep nesting whatever surrounds it.
//
//	go test -fuzz FuzzCheck ./internal/mimelimit
func FuzzCheck(f *testing.F) {
	for _, raw := range seeds(f) {
		f.Add(raw)
	}
	f.Add(mimetest.Nested(3))
	f.Add(mimetest.Nested(DefaultMaxDepth + 5))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\nContent-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\n\r\n--a--\r\n"))
	// An invalid UTF-8 byte before "boundary" in a Content-Type that does
	// not parse once made the loose boundary search slice out of range.
	f.Add([]byte("Content-TYpe:0\x80BoundArY\n\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=a\r\n\r\nx --a y\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		lim := Limits{MaxDepth: 8, MaxParts: 200}
		shape, err := Check(raw, lim)
		if err != nil {
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("error that is not a limit: %v", err)
			}
			return
		}
		if shape.Depth > lim.MaxDepth || shape.Parts > lim.MaxParts || len(shape.PartOffsets) != shape.Parts {
			t.Fatalf("shape over the limits: %+v", shape)
		}
		depth, _, ok := enmimeDepth(raw)
		if ok && depth > shape.Depth {
			t.Fatalf("enmime nests %d levels, Check measured %d", depth, shape.Depth)
		}
		// The same bytes wrapped in more multiparts than allowed are refused.
		deep := mimetest.Nested(lim.MaxDepth + 1)
		wrapped := bytes.Replace(deep, []byte("hello\r\n"), raw, 1)
		if _, err := Check(wrapped, lim); !errors.Is(err, ErrLimit) {
			t.Fatalf("deep nesting around the input accepted")
		}
	})
}

// BenchmarkCheckDeepNesting measures refusing the 10,000-level message.
func BenchmarkCheckDeepNesting(b *testing.B) {
	raw := mimetest.Nested(10000)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Check(raw, Default()); err == nil {
			b.Fatal("accepted")
		}
	}
}

// TestCheckInvalidUTF8ContentType checks that a Content-Type with invalid
// UTF-8 before its boundary parameter is measured, not a panic.
func TestCheckInvalidUTF8ContentType(t *testing.T) {
	shape, err := Check([]byte("Content-TYpe:0\x80BoundArY\n\n"), Default())
	require.NoError(t, err)
	require.Equal(t, 0, shape.Depth)
	// The boundary after the invalid bytes is still found.
	shape, err = Check([]byte("Content-Type: multipart/mixed; \xff\xfe\xfd; Boundary=q;;\n\n--q\n\nhi\n--q--\n"), Default())
	require.NoError(t, err)
	require.Equal(t, 1, shape.Parts)
}
