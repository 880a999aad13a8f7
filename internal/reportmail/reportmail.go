// Package reportmail finds the files a report email carries (RFC 2045/2046
// MIME, RFC 6522 multipart/report): the aggregate report attachment of an
// RFC 7489 mail, the application/tlsrpt+json or +gzip part of an RFC 8460
// mail, the message/feedback-report part of an RFC 6591 failure report. It
// knows no report format; dmarcrpt, tlsrpt and arf read what it returns.
//
// Parsing is bounded: the message must fit MaxMessageBytes, and the MIME tree
// may hold at most MaxParts parts nested at most MaxDepth deep.
package reportmail

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/mailwatch/mailwatch/internal/mimelimit"
	"net/textproto"
	"strings"

	"github.com/jhillyerd/enmime"
)

// Bounds of one message. Report mails are small multiparts; a tree deeper or
// wider than this is not a report.
const (
	MaxMessageBytes = 15 << 20
	MaxParts        = 100
	MaxDepth        = 8
)

var (
	// ErrTooLarge is returned for a message over MaxMessageBytes.
	ErrTooLarge = errors.New("message too large")
	// ErrTooComplex is returned for a MIME tree over MaxParts or MaxDepth.
	ErrTooComplex = errors.New("MIME structure too complex")
	// ErrNotMIME is returned when the bytes are not an email at all.
	ErrNotMIME = errors.New("not an email message")
)

// Part is one leaf of the message: a body without children.
type Part struct {
	// ContentType is the media type in lower case, without parameters.
	ContentType string
	// FileName is the file name from Content-Disposition or Content-Type.
	FileName string
	// Header holds the part's MIME header.
	Header textproto.MIMEHeader
	// Content is the body after transfer decoding, never charset-converted.
	Content []byte
}

// Message is a parsed report email.
type Message struct {
	// Header is the top-level header of the message.
	Header textproto.MIMEHeader
	// Parts lists the leaves in document order.
	Parts []Part
}

// Parse parses raw as an email and returns its leaves.
func Parse(raw []byte) (*Message, error) {
	if len(raw) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(raw), MaxMessageBytes)
	}
	// A message saved from an mbox starts with its "From " separator line.
	if bytes.HasPrefix(raw, []byte("From ")) {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		}
	}
	if !looksLikeHeader(raw) {
		return nil, ErrNotMIME
	}
	// Bound the structure before enmime reads it: a deeply nested message
	// costs the parser time quadratic in its depth (mimelimit).
	if _, err := mimelimit.Check(raw, mimelimit.Limits{MaxDepth: MaxDepth, MaxParts: MaxParts}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTooComplex, err)
	}
	parser := enmime.NewParser(
		enmime.SkipMalformedParts(true),
		enmime.MultipartWOBoundaryAsSinglePart(true),
		enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
		enmime.MaxStoredPartErrors(10),
		enmime.DisableTextConversion(true),
		enmime.DisableCharacterDetection(true),
	)
	root, err := parser.ReadParts(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotMIME, err)
	}
	if err := checkBounds(root); err != nil {
		return nil, err
	}
	m := &Message{Header: root.Header}
	var walk func(p *enmime.Part)
	walk = func(p *enmime.Part) {
		for ; p != nil; p = p.NextSibling {
			if p.FirstChild != nil {
				walk(p.FirstChild)
				continue
			}
			m.Parts = append(m.Parts, Part{
				ContentType: strings.ToLower(p.ContentType),
				FileName:    p.FileName,
				Header:      p.Header,
				Content:     p.Content,
			})
		}
	}
	walk(root)
	return m, nil
}

// checkBounds checks the tree enmime built against the same bounds that
// mimelimit.Check applied to the raw bytes, in case the two count a
// malformed message differently.
func checkBounds(root *enmime.Part) error {
	n := 0
	var visit func(p *enmime.Part, depth int) error
	visit = func(p *enmime.Part, depth int) error {
		if depth > MaxDepth {
			return fmt.Errorf("%w: nested more than %d deep", ErrTooComplex, MaxDepth)
		}
		for ; p != nil; p = p.NextSibling {
			n++
			if n > MaxParts {
				return fmt.Errorf("%w: more than %d parts", ErrTooComplex, MaxParts)
			}
			if err := visit(p.FirstChild, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return visit(root, 0)
}

// looksLikeHeader reports whether raw starts with a header field
// ("Name: value"), as every message does (RFC 5322 section 2.2).
func looksLikeHeader(raw []byte) bool {
	line := raw
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		line = raw[:i]
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return false
	}
	for _, c := range line[:colon] {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}
