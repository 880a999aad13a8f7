package reportmail

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
)

var (
	// ErrDecompressedTooLarge is returned when a gzip or zip member expands
	// past the caller's limit (a zip bomb, or simply too big).
	ErrDecompressedTooLarge = errors.New("decompressed report too large")
	// ErrBadArchive is returned for a corrupt gzip stream or zip file, or a
	// zip that does not hold exactly one file.
	ErrBadArchive = errors.New("bad archive")
)

// IsGzip reports whether b starts with the gzip magic (RFC 1952).
func IsGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// IsZip reports whether b starts with a zip local file header (or the
// end record of an empty archive).
func IsZip(b []byte) bool {
	return len(b) >= 4 && (string(b[:4]) == "PK\x03\x04" || string(b[:4]) == "PK\x05\x06")
}

// Gunzip decompresses the first gzip member of b, reading at most limit
// bytes of output. Bytes after a complete member (some reporters append a
// CRLF) are ignored: reports are one member.
func Gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrBadArchive, err)
	}
	zr.Multistream(false)
	return readLimited(zr, limit, "gzip")
}

// Unzip returns the one file of the zip archive b, reading at most limit
// bytes of output. Directories are ignored; any other number of files is an
// error. The declared size is checked before reading and the read is capped
// whatever the header claims.
func Unzip(b []byte, limit int64) ([]byte, error) {
	// archive/zip reads the whole central directory into memory before the
	// one-file rule can apply; read the entry count from the end record
	// first, so a small archive of a million empty entries costs nothing.
	if n, ok := zipEntryCount(b); !ok {
		return nil, fmt.Errorf("%w: zip has no end of central directory record", ErrBadArchive)
	} else if n > maxZipEntries {
		return nil, fmt.Errorf("%w: zip holds %d entries, at most %d", ErrBadArchive, n, maxZipEntries)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: zip: %v", ErrBadArchive, err)
	}
	var file *zip.File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if file != nil {
			return nil, fmt.Errorf("%w: zip holds more than one file", ErrBadArchive)
		}
		file = f
	}
	if file == nil {
		return nil, fmt.Errorf("%w: zip holds no file", ErrBadArchive)
	}
	if file.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%w: zip member declares %d bytes, at most %d", ErrDecompressedTooLarge, file.UncompressedSize64, limit)
	}
	rc, err := file.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: zip: %v", ErrBadArchive, err)
	}
	defer rc.Close()
	return readLimited(rc, limit, "zip")
}

func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadArchive, what, err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", ErrDecompressedTooLarge, limit)
	}
	return out, nil
}

// maxZipEntries bounds the entries (files and directories) of a report
// zip: a report is one file, perhaps inside a folder or two.
const maxZipEntries = 16

// zipEntryCount reads the total entry count from the end of central
// directory record (APPNOTE 4.3.16), searched for in the last 64 KiB plus
// the record's own size, as archive/zip does. A ZIP64 archive (count
// 0xFFFF) reports the marker itself, which is over the bound: reports are
// never that large.
func zipEntryCount(b []byte) (int, bool) {
	const recLen = 22
	if len(b) < recLen {
		return 0, false
	}
	start := len(b) - recLen - 65535
	if start < 0 {
		start = 0
	}
	i := bytes.LastIndex(b[start:], []byte("PK\x05\x06"))
	if i < 0 || start+i+recLen > len(b) {
		return 0, false
	}
	rec := b[start+i:]
	return int(rec[10]) | int(rec[11])<<8, true
}
