package inbound

import (
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jhillyerd/enmime"

	"github.com/mailwatch/mailwatch/internal/mimelimit"
)

// Limits applied by Parse. A message is untrusted input: every list and every
// header value it can produce is bounded.
const (
	// MaxMessageBytes is the largest raw message Parse accepts. Listeners
	// should cap what they accept at or below this size.
	MaxMessageBytes = 25 << 20

	// MaxHeaders is the number of header fields kept in Message.Headers.
	MaxHeaders = 1000

	// MaxHeaderValueBytes is the length a header value is truncated to.
	MaxHeaderValueBytes = 16 << 10

	// MaxAttachments is the number of attachments listed in Message.Attachments.
	MaxAttachments = 500

	// MaxRecipients is the number of addresses kept for each of To and Cc.
	MaxRecipients = 500

	// MaxParts is the number of MIME parts Parse reads; the rest of a
	// message with more is ignored (and reported in Warnings). enmime's
	// cost grows with the square of the number of text parts. A message
	// beyond mimelimit's limits (nesting depth, mimelimit.DefaultMaxParts
	// parts, parse work) is refused outright.
	MaxParts = 200

	// maxWarnings bounds Message.Warnings.
	maxWarnings = 20
)

var (
	// ErrEmptyMessage is returned by Parse for an empty input.
	ErrEmptyMessage = errors.New("empty message")

	// ErrMessageTooLarge is returned by Parse for an input over MaxMessageBytes.
	ErrMessageTooLarge = errors.New("message too large")

	// ErrMalformedMessage is returned by Parse when the MIME structure can't
	// be read at all. Most defects give a best-effort Message instead, with
	// the problems listed in Message.Warnings.
	ErrMalformedMessage = errors.New("malformed message")
)

// Address is a mailbox from an address header (RFC 5322 section 3.4), with
// any RFC 2047 encoded display name decoded to UTF-8.
type Address struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// String formats the address for display, e.g. `"Ann" <ann@example.com>`.
func (a Address) String() string {
	return (&mail.Address{Name: a.Name, Address: a.Address}).String()
}

// Header is one header field of the top-level message, value unfolded
// (RFC 5322 section 2.2.3) and RFC 2047 decoded to UTF-8.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Attachment disposition values (RFC 2183).
const (
	DispositionAttachment = "attachment"
	DispositionInline     = "inline"
)

// Attachment describes a non-body MIME part. The content itself stays in the
// raw message.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	// Size is the decoded size in bytes (after base64 or quoted-printable).
	Size int `json:"size"`
	// ContentID is the Content-ID (RFC 2392) without angle brackets, the
	// target of cid: URLs in HTML bodies.
	ContentID string `json:"content_id,omitempty"`
	// Disposition is DispositionInline or DispositionAttachment.
	Disposition string `json:"disposition"`
}

// Message is a parsed inbound email as a receiver shows it. Every string is
// valid UTF-8 and every slice is non-nil, so it encodes to JSON arrays.
type Message struct {
	From        Address      `json:"from"`
	To          []Address    `json:"to"`
	Cc          []Address    `json:"cc"`
	Subject     string       `json:"subject"`
	Date        *time.Time   `json:"date,omitempty"`
	MessageID   string       `json:"message_id,omitempty"`
	Text        string       `json:"text"`
	HTML        string       `json:"html"`
	Headers     []Header     `json:"headers"`
	Attachments []Attachment `json:"attachments"`
	Links       []string     `json:"links"`
	Codes       []string     `json:"codes"`
	// Warnings lists the defects worked around while parsing, for logs.
	Warnings []string `json:"warnings,omitempty"`
}

// Parse parses a raw RFC 5322 message with MIME parts. Transfer encodings
// (base64, quoted-printable) are undone, text parts are converted from their
// declared charset to UTF-8 (the charset is only guessed when none is
// declared), and Links and Codes are extracted from the bodies.
//
// Parse is lenient: a defective message gives a best-effort Message with
// Warnings rather than an error. It returns an error only for an empty input,
// one over MaxMessageBytes, one whose MIME structure passes mimelimit's
// limits (a *mimelimit.LimitError, matching mimelimit.ErrLimit, checked
// before enmime reads anything), or one enmime can't read at all. It never
// panics.
func Parse(raw []byte) (msg *Message, err error) {
	if len(raw) == 0 {
		return nil, ErrEmptyMessage
	}
	if len(raw) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, len(raw), MaxMessageBytes)
	}

	// enmime is a large parser of hostile input; a bug in it must not take
	// down the SMTP listener or an API process.
	defer func() {
		if r := recover(); r != nil {
			msg = nil
			err = fmt.Errorf("%w: parser panic: %v", ErrMalformedMessage, r)
		}
	}()

	parser := enmime.NewParser(
		enmime.SkipMalformedParts(true),
		enmime.MultipartWOBoundaryAsSinglePart(true),
		enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
		enmime.MaxStoredPartErrors(maxWarnings),
		// Trust a declared charset; guessing only when none is declared.
		// Statistical detection misreads short Latin-1 and Shift_JIS bodies.
		enmime.DisableCharacterDetection(true),
	)
	// The MIME structure is bounded before enmime sees it: its cost grows
	// with the bytes times the nesting depth.
	shape, err := mimelimit.Check(raw, mimelimit.Default())
	if err != nil {
		return nil, err
	}
	var warnings []string
	body := raw
	if len(shape.PartOffsets) > MaxParts {
		body = raw[:shape.PartOffsets[MaxParts]]
		warnings = append(warnings, fmt.Sprintf("message has more than %d MIME parts; the rest was ignored", MaxParts))
	}
	env, err := parser.ReadEnvelope(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedMessage, err)
	}

	msg = &Message{
		Subject:     cleanText(env.GetHeader("Subject"), MaxHeaderValueBytes),
		MessageID:   cleanText(strings.Trim(strings.TrimSpace(env.GetHeader("Message-Id")), "<>"), MaxHeaderValueBytes),
		Text:        cleanText(env.Text, MaxMessageBytes),
		HTML:        cleanText(env.HTML, MaxMessageBytes),
		Headers:     parseHeaderFields(raw),
		Attachments: attachments(env),
	}

	if from := addressList(env, "From", &warnings); len(from) > 0 {
		msg.From = from[0]
	} else if sender := addressList(env, "Sender", &warnings); len(sender) > 0 {
		msg.From = sender[0]
	}
	msg.To = addressList(env, "To", &warnings)
	msg.Cc = addressList(env, "Cc", &warnings)
	if date, err := env.Date(); err == nil {
		date = date.UTC()
		msg.Date = &date
	}

	for _, perr := range env.Errors {
		warnings = append(warnings, perr.String())
	}
	if len(warnings) > maxWarnings {
		warnings = warnings[:maxWarnings]
	}
	for i := range warnings {
		warnings[i] = cleanText(warnings[i], 512)
	}
	msg.Warnings = warnings

	msg.Links = Links(msg.Text, msg.HTML)
	msg.Codes = Codes(msg.Subject, msg.Text)
	return msg, nil
}

// addressList parses an address header, falling back to picking out
// anything shaped like an address when the header isn't valid RFC 5322.
func addressList(env *enmime.Envelope, key string, warnings *[]string) []Address {
	out := []Address{}
	if env.GetHeader(key) == "" {
		return out
	}
	list, err := env.AddressList(key)
	if err == nil {
		for _, a := range list {
			if len(out) == MaxRecipients {
				break
			}
			out = append(out, Address{
				Name:    cleanText(a.Name, 512),
				Address: cleanText(a.Address, 512),
			})
		}
		return out
	}

	*warnings = append(*warnings, fmt.Sprintf("unparsable %s header: %v", key, err))
	for _, addr := range looseAddressRE.FindAllString(env.GetHeader(key), MaxRecipients) {
		out = append(out, Address{Address: cleanText(addr, 512)})
	}
	return out
}

// looseAddressRE matches something shaped like local@domain in a header that
// failed strict parsing.
var looseAddressRE = regexp.MustCompile(`[^\s<>"(),;:\[\]@]+@[^\s<>"(),;:\[\]@]+`)

// attachments lists the non-body parts in document order: parts with an
// attachment or inline disposition and parts of a non-text type, such as an
// image inside multipart/related referenced by Content-ID.
func attachments(env *enmime.Envelope) []Attachment {
	out := []Attachment{}
	if env.Root == nil {
		return out
	}

	selected := make(map[*enmime.Part]bool)
	for _, p := range env.Attachments {
		selected[p] = true
	}
	for _, p := range env.OtherParts {
		selected[p] = true
	}
	for _, p := range env.Inlines {
		// A text part marked inline without a file name is the body itself.
		if p.FileName == "" && (p.ContentType == "text/plain" || p.ContentType == "text/html") {
			continue
		}
		selected[p] = true
	}

	parts := env.Root.DepthMatchAll(func(p *enmime.Part) bool { return selected[p] })
	for _, p := range parts {
		if len(out) == MaxAttachments {
			break
		}
		disposition := strings.ToLower(p.Disposition)
		if disposition != DispositionInline && disposition != DispositionAttachment {
			// RFC 2183 leaves an absent disposition to the reader; a part
			// with a Content-ID is meant to be shown inline.
			disposition = DispositionAttachment
			if p.ContentID != "" {
				disposition = DispositionInline
			}
		}
		contentType := p.ContentType
		if contentType == "" {
			contentType = "application/octet-stream"
		}
		out = append(out, Attachment{
			Filename:    cleanText(p.FileName, 1024),
			ContentType: cleanText(strings.ToLower(contentType), 256),
			Size:        len(p.Content),
			ContentID:   cleanText(p.ContentID, 1024),
			Disposition: disposition,
		})
	}
	return out
}

// parseHeaderFields returns the top-level header fields in their original
// order, which enmime's map-based header loses. Lines are unfolded (RFC 5322
// section 2.2.3), encoded words decoded (RFC 2047), and malformed lines
// skipped.
func parseHeaderFields(raw []byte) []Header {
	out := []Header{}

	// The header section ends at the first empty line (RFC 5322 section 2.1).
	block := raw
	if i := bytes.Index(block, []byte("\n\r\n")); i >= 0 {
		block = block[:i+1]
	}
	if i := bytes.Index(block, []byte("\n\n")); i >= 0 {
		block = block[:i+1]
	}
	if bytes.HasPrefix(block, []byte("\r\n")) || bytes.HasPrefix(block, []byte("\n")) {
		return out
	}

	var name string
	var value []byte
	flush := func() {
		if name == "" || len(out) == MaxHeaders {
			name, value = "", nil
			return
		}
		out = append(out, Header{
			Name:  name,
			Value: cleanText(decodeHeaderValue(string(bytes.TrimSpace(value))), MaxHeaderValueBytes),
		})
		name, value = "", nil
	}

	for len(block) > 0 {
		line := block
		if i := bytes.IndexByte(block, '\n'); i >= 0 {
			line, block = block[:i], block[i+1:]
		} else {
			block = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))

		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			// Continuation of a folded field.
			if name != "" && len(value) < MaxHeaderValueBytes {
				value = append(value, line...)
			}
			continue
		}
		flush()
		if len(out) == MaxHeaders {
			break
		}

		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validFieldName(line[:colon]) {
			// Not a field, e.g. an mbox "From " line: skip it.
			continue
		}
		name = string(line[:colon])
		value = append([]byte(nil), line[colon+1:]...)
	}
	flush()
	return out
}

// validFieldName reports whether b is a field name made of printable ASCII
// other than colon (RFC 5322 section 2.2).
func validFieldName(b []byte) bool {
	for _, c := range b {
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

// decodeHeaderValue decodes RFC 2047 encoded words, leaving values it can't
// decode as they are.
func decodeHeaderValue(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	return enmime.DecodeRFC2047(v)
}

// cleanText makes s valid UTF-8 without NUL bytes (which Postgres text
// columns refuse) and cuts it to at most max
// bytes on a rune boundary.
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
