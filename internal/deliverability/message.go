package deliverability

import (
	"bytes"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/jhillyerd/enmime"

	"github.com/mailwatch/mailwatch/internal/mimelimit"
)

// field is one top-level header field, its value unfolded but not decoded.
type field struct {
	name  string // as written
	value string
}

// message is what the header and content checks read of a message.
type message struct {
	size   int
	fields []field
	// headersTruncated is true when fields stopped at MaxHeaders.
	headersTruncated bool
	// tooLarge is true when the message is over MaxMessageBytes: nothing
	// past the header was read.
	tooLarge bool
	// parseErr is set when the MIME structure is over a limit or unreadable.
	parseErr error
	// text and html are the decoded body parts (no HTML-to-text conversion).
	text, html string
}

// parseMessage reads the header fields and, within the limits, the body.
func parseMessage(raw []byte, lim Limits) *message {
	m := &message{size: len(raw)}
	m.fields, m.headersTruncated = headerFields(raw, lim)
	if len(raw) > lim.MaxMessageBytes {
		m.tooLarge = true
		return m
	}
	m.text, m.html, m.parseErr = readBody(raw, lim)
	return m
}

// headerFields splits the top-level header of raw into fields, unfolding
// continuation lines (RFC 5322 section 2.2.3). Lines without a colon are
// skipped. It keeps at most MaxHeaders fields, each value cut to
// MaxHeaderValueBytes.
func headerFields(raw []byte, lim Limits) ([]field, bool) {
	var fields []field
	for off := 0; off < len(raw); {
		line := raw[off:]
		next := len(raw)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		off = next
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break // end of the header
		}
		if line[0] == ' ' || line[0] == '\t' {
			if n := len(fields); n > 0 && len(fields[n-1].value) < lim.MaxHeaderValueBytes {
				v := fields[n-1].value + " " + string(bytes.TrimSpace(line))
				fields[n-1].value = truncate(v, lim.MaxHeaderValueBytes)
			}
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		if len(fields) == lim.MaxHeaders {
			return fields, true
		}
		fields = append(fields, field{
			name:  string(bytes.TrimSpace(line[:colon])),
			value: truncate(string(bytes.TrimSpace(line[colon+1:])), lim.MaxHeaderValueBytes),
		})
	}
	return fields, false
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// values returns the values of every field called name (case-insensitive).
func (m *message) values(name string) []string {
	var out []string
	for _, f := range m.fields {
		if strings.EqualFold(f.name, name) {
			out = append(out, f.value)
		}
	}
	return out
}

// value returns the first value of name, or "".
func (m *message) value(name string) string {
	if v := m.values(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// decoded returns the first value of name with RFC 2047 encoded words
// decoded, or the raw value when they do not decode.
func (m *message) decoded(name string) string {
	v := m.value(name)
	dec := mime.WordDecoder{}
	if d, err := dec.DecodeHeader(v); err == nil {
		return d
	}
	return v
}

// readBody bounds the MIME structure with mimelimit, then lets enmime decode
// the text and HTML bodies. Parts past MaxParts are ignored.
func readBody(raw []byte, lim Limits) (text, html string, err error) {
	shape, err := mimelimit.Check(raw, mimelimit.Limits{MaxDepth: lim.MaxDepth})
	if err != nil {
		return "", "", err
	}
	body := raw
	if len(shape.PartOffsets) > lim.MaxParts {
		body = raw[:shape.PartOffsets[lim.MaxParts]]
	}
	// enmime is a large parser of hostile input; a bug in it is a finding,
	// not a crashed worker.
	defer func() {
		if r := recover(); r != nil {
			text, html, err = "", "", fmt.Errorf("MIME parser failed: %v", r)
		}
	}()
	parser := enmime.NewParser(
		enmime.SkipMalformedParts(true),
		enmime.MultipartWOBoundaryAsSinglePart(true),
		enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
		enmime.MaxStoredPartErrors(10),
		enmime.DisableCharacterDetection(true),
		// A message without a text part must look like one: no text is
		// made up from the HTML.
		enmime.DisableTextConversion(true),
	)
	env, err := parser.ReadEnvelope(bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	return strings.ToValidUTF8(env.Text, "\uFFFD"), strings.ToValidUTF8(env.HTML, "\uFFFD"), nil
}
