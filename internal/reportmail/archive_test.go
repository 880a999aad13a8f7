package reportmail_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/reportmail"
)

func zipOf(t *testing.T, dirs int, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for i := range dirs {
		_, err := w.Create(fmt.Sprintf("d%d/", i))
		require.NoError(t, err)
	}
	for name, body := range files {
		f, err := w.Create(name)
		require.NoError(t, err)
		_, err = f.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func TestUnzip(t *testing.T) {
	t.Parallel()
	out, err := reportmail.Unzip(zipOf(t, 1, map[string]string{"d0/report.xml": "<feedback/>"}), 1<<20)
	require.NoError(t, err)
	require.Equal(t, "<feedback/>", string(out))

	_, err = reportmail.Unzip(zipOf(t, 0, map[string]string{"a.xml": "a", "b.xml": "b"}), 1<<20)
	require.ErrorIs(t, err, reportmail.ErrBadArchive)
	_, err = reportmail.Unzip(zipOf(t, 0, map[string]string{"a.xml": "aaaaaaaaaaaaaaaa"}), 4)
	require.ErrorIs(t, err, reportmail.ErrDecompressedTooLarge)
	_, err = reportmail.Unzip([]byte("PK\x03\x04 truncated"), 1<<20)
	require.ErrorIs(t, err, reportmail.ErrBadArchive)
}

// TestUnzipManyEntriesRefusedCheaply: an archive of 200,000 directory
// entries (a few MB) is refused from its end record, before archive/zip
// builds its directory in memory.
//
// Not parallel: it measures its own allocations, so it runs alone.
func TestUnzipManyEntriesRefusedCheaply(t *testing.T) {
	b := zipOf(t, 200_000, map[string]string{"report.xml": "<feedback/>"})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := reportmail.Unzip(b, 1<<20)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, reportmail.ErrBadArchive)
	require.Contains(t, err.Error(), "entries")
	// archive/zip allocates well over 20 MB for this directory; the end
	// record costs nothing.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20))
}
