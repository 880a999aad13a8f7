package dmarcrpt

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/mailwatch/mailwatch/internal/reportmail"
)

// ErrNoReport is returned for an email or file that carries no aggregate
// report.
var ErrNoReport = errors.New("no aggregate report found")

// Format names the wrapper a report came in.
type Format string

// Formats ParseFile recognises.
const (
	FormatXML   Format = "xml"
	FormatGzip  Format = "gzip"
	FormatZip   Format = "zip"
	FormatEmail Format = "email"
)

// ParseFile parses a report in any of its forms: XML, gzip, zip holding one
// file, or an email carrying one of those. It returns the form it found.
func ParseFile(data []byte) (*Feedback, Format, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, "", ErrEmpty
	}
	if f, format, err := parseBlob(data); format != "" {
		return f, format, err
	}
	f, err := ParseMessage(data)
	return f, FormatEmail, err
}

// parseBlob parses XML, gzip or zip; it returns an empty Format when data
// is none of these.
func parseBlob(data []byte) (*Feedback, Format, error) {
	switch {
	case reportmail.IsGzip(data):
		xmlBytes, err := reportmail.Gunzip(data, MaxReportBytes)
		if err != nil {
			return nil, FormatGzip, err
		}
		f, err := Parse(xmlBytes)
		return f, FormatGzip, err
	case reportmail.IsZip(data):
		xmlBytes, err := reportmail.Unzip(data, MaxReportBytes)
		if err != nil {
			return nil, FormatZip, err
		}
		f, err := Parse(xmlBytes)
		return f, FormatZip, err
	case looksLikeXML(data):
		f, err := Parse(data)
		return f, FormatXML, err
	}
	return nil, "", nil
}

// ParseMessage parses a report email (RFC 7489 section 7.2.1.1): the report
// is the first part that is a zip, gzip or XML file, whatever its declared
// content type (application/zip, application/gzip, application/x-gzip,
// text/xml, application/octet-stream...), including a message whose single
// body is the file.
func ParseMessage(raw []byte) (*Feedback, error) {
	msg, err := reportmail.Parse(raw)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, p := range msg.Parts {
		if !candidate(p) {
			continue
		}
		if len(bytes.TrimSpace(p.Content)) == 0 {
			if firstErr == nil && reportFileName(p.FileName) {
				firstErr = fmt.Errorf("attachment %q: %w", p.FileName, ErrEmpty)
			}
			continue
		}
		f, format, err := parseBlob(p.Content)
		if format == "" {
			continue
		}
		// The first part that is a report (by its format) decides: trying
		// every other part after a failure would let one message cost up to
		// MaxParts decompressions of MaxReportBytes each.
		return f, err
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, ErrNoReport
}

// candidate reports whether a part may hold the report: the text the
// reporter wrote around it is skipped.
func candidate(p reportmail.Part) bool {
	switch p.ContentType {
	case "text/plain", "text/html", "message/rfc822", "message/delivery-status", "message/feedback-report":
		return reportFileName(p.FileName)
	}
	return true
}

// reportFileName reports whether a file name is that of a report file.
func reportFileName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".xml" || ext == ".gz" || ext == ".zip"
}

// looksLikeXML reports whether data starts, after a byte order mark and
// white space, with "<".
func looksLikeXML(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '<'
}
