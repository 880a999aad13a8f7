// Package mimelimit bounds the structure of a MIME message (RFC 2045, RFC
// 2046 section 5.1) before a full parser reads it.
//
// A MIME parser such as enmime reads a multipart body through one boundary
// reader per enclosing multipart, so its work grows with the bytes times the
// nesting depth: a 727 KB message of 10,000 nested multipart/mixed parts
// takes it 45 s of CPU. Check walks the message once, line by line, the way
// enmime finds headers and boundaries (its own media-type parser reads each
// Content-Type), and refuses it as soon as the nesting depth, the number of
// parts or that work passes a limit. Its own cost is linear in the size times
// at most Limits.MaxDepth, so a refusal is cheap.
//
// Every parser of inbound mail (receivers, DMARC and TLS reports by mail)
// calls Check first and refuses a message with a *LimitError permanently.
package mimelimit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/jhillyerd/enmime/mediatype"
)

// Default limits. Real mail nests a handful of levels (mixed, alternative,
// related, a signature or two) and has tens of parts.
const (
	// DefaultMaxDepth is the deepest nesting of multiparts, the top-level
	// one counting as 1.
	DefaultMaxDepth = 20
	// DefaultMaxParts is the most body parts in all multiparts together.
	DefaultMaxParts = 1000
	// DefaultMaxWork bounds the bytes a parser reads through its boundary
	// readers: each line counts once per multipart enclosing it. 256 MiB is
	// a 25 MiB message ten levels deep, about a second of enmime.
	DefaultMaxWork = 256 << 20
)

// Limits bounds a message's MIME structure. Zero fields take the defaults.
type Limits struct {
	MaxDepth int
	MaxParts int
	MaxWork  int64
}

// Default returns the default limits.
func Default() Limits {
	return Limits{MaxDepth: DefaultMaxDepth, MaxParts: DefaultMaxParts, MaxWork: DefaultMaxWork}
}

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("MIME structure over a limit")

// LimitError says which limit a message passed. Its message names the limit
// and is safe to show to the sender (an SMTP reply, an API detail).
type LimitError struct {
	// Limit is "nesting depth", "part count" or "parse work".
	Limit string
	// Max is the limit's value (levels, parts or bytes).
	Max int64
}

func (e *LimitError) Error() string {
	if e.Limit == LimitWork {
		return fmt.Sprintf("the message's MIME structure is too costly to parse: over %d bytes read through nested multiparts", e.Max)
	}
	unit := "levels"
	if e.Limit == LimitParts {
		unit = "parts"
	}
	return fmt.Sprintf("the message's MIME %s is over the limit of %d %s", e.Limit, e.Max, unit)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Names of the limits in LimitError.Limit.
const (
	LimitDepth = "nesting depth"
	LimitParts = "part count"
	LimitWork  = "parse work"
)

// Shape is what Check saw of a message within the limits.
type Shape struct {
	// Depth is the deepest multipart nesting (0 for a single-part message).
	Depth int
	// Parts counts the body parts of all multiparts.
	Parts int
	// Work is the bytes a parser reads through its boundary readers.
	Work int64
	// PartOffsets holds the offset of each part's boundary line, in order.
	PartOffsets []int
}

// level is one open multipart.
type level struct {
	delim []byte // "--" + boundary
	parts int    // parts seen so far; 0 while in the preamble
}

// Check walks raw's MIME structure and returns its shape, or a *LimitError
// as soon as a limit is passed. It never fails otherwise: a malformed
// structure is measured as a lenient parser would read it, and the
// measurement errs on the side of more depth and more parts.
func Check(raw []byte, lim Limits) (Shape, error) {
	w := walker{lim: lim.withDefaults(), inHeader: true, root: true}
	for off := 0; off < len(raw); {
		line := raw[off:]
		next := len(raw)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
			next = off + i + 1
		}
		if err := w.line(line, off); err != nil {
			return w.shape, err
		}
		off = next
	}
	return w.shape, nil
}

// withDefaults returns lim with its zero (or negative) fields set to the
// defaults.
func (lim Limits) withDefaults() Limits {
	def := Default()
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = def.MaxDepth
	}
	if lim.MaxParts <= 0 {
		lim.MaxParts = def.MaxParts
	}
	if lim.MaxWork <= 0 {
		lim.MaxWork = def.MaxWork
	}
	return lim
}

// walker is Check's state between lines.
type walker struct {
	lim      Limits
	shape    Shape
	stack    []level
	inHeader bool
	root     bool
	ctype    []byte // the first Content-Type value of the current header
	field    []byte // the field being read, while it is a Content-Type
	gotCT    bool
}

// line measures one line (with its "\n", if any) starting at off.
func (w *walker) line(line []byte, off int) error {
	w.shape.Work += int64(len(line)) * int64(len(w.stack))
	if w.shape.Work > w.lim.MaxWork {
		return &LimitError{Limit: LimitWork, Max: w.lim.MaxWork}
	}

	// A boundary line ends whatever is open inside its multipart. The
	// outermost reader sees each line first, so outer boundaries win;
	// they are found at the start of a line only, except in the
	// preamble of the innermost multipart, where enmime looks for its
	// boundary anywhere in the line.
	if i, final, ok := matchBoundary(w.stack, line); ok {
		return w.boundary(i, final, off)
	}
	if w.inHeader {
		return w.headerLine(line)
	}
	return nil
}

// boundary handles a boundary line of the multipart at stack index i: it
// closes what is open inside it and, unless final, starts a part.
func (w *walker) boundary(i int, final bool, off int) error {
	if w.inHeader {
		w.field = nil
	}
	w.stack = w.stack[:i+1]
	if final {
		w.stack = w.stack[:i]
		w.inHeader = false
		return nil
	}
	w.stack[i].parts++
	w.shape.Parts++
	if w.shape.Parts > w.lim.MaxParts {
		return &LimitError{Limit: LimitParts, Max: int64(w.lim.MaxParts)}
	}
	w.shape.PartOffsets = append(w.shape.PartOffsets, off)
	w.inHeader, w.ctype, w.field, w.gotCT = true, nil, nil, false
	return nil
}

// headerLine reads one line of a header, keeping the first Content-Type.
func (w *walker) headerLine(line []byte) error {
	content := bytes.TrimRight(line, "\r\n")
	switch {
	case len(content) == 0:
		return w.endHeader()
	case content[0] == ' ' || content[0] == '\t' || bytes.IndexByte(content, ':') < 0:
		// A continuation, indented or not (enmime repairs both).
		if w.field != nil {
			w.field = append(append(w.field, ' '), bytes.TrimSpace(content)...)
		}
	default:
		if w.field != nil && !w.gotCT {
			w.ctype, w.gotCT = w.field, true
		}
		w.field = nil
		colon := bytes.IndexByte(content, ':')
		if !w.gotCT && strings.EqualFold(string(bytes.TrimSpace(content[:colon])), "content-type") {
			w.field = append([]byte(nil), bytes.TrimSpace(content[colon+1:])...)
		}
	}
	return nil
}

// endHeader ends a header at its blank line: a multipart Content-Type
// opens a level.
func (w *walker) endHeader() error {
	if w.field != nil && !w.gotCT {
		w.ctype, w.gotCT = w.field, true
	}
	boundary, ok := boundaryOf(w.ctype, w.root)
	w.root, w.inHeader, w.ctype, w.field, w.gotCT = false, false, nil, nil, false
	if !ok {
		return nil
	}
	if len(w.stack) == w.lim.MaxDepth {
		return &LimitError{Limit: LimitDepth, Max: int64(w.lim.MaxDepth)}
	}
	w.stack = append(w.stack, level{delim: append([]byte("--"), boundary...)})
	w.shape.Depth = max(w.shape.Depth, len(w.stack))
	return nil
}

// matchBoundary finds the outermost open multipart whose boundary line line
// is, and whether it is the closing one ("--boundary--").
func matchBoundary(stack []level, line []byte) (i int, final, ok bool) {
	for i := range stack {
		l := &stack[i]
		innermostPreamble := i == len(stack)-1 && l.parts == 0
		at := 0
		if !bytes.HasPrefix(line, l.delim) {
			if !innermostPreamble {
				continue
			}
			if at = bytes.Index(line, l.delim); at < 0 {
				continue
			}
		}
		rest := line[at+len(l.delim):]
		if bytes.HasPrefix(rest, []byte("--")) {
			return i, true, true
		}
		if len(rest) > 0 && isSpace(rest[0]) {
			return i, false, true
		}
	}
	return 0, false, false
}

// isSpace is unicode.IsSpace of a byte taken as a rune, as enmime tests the
// byte after a boundary.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x85, 0xA0:
		return true
	}
	return false
}

// boundaryOf returns the boundary that makes a part with this Content-Type a
// multipart for enmime: a top-level multipart/* (even without a boundary) and
// any inner part with a boundary parameter, whatever its type.
func boundaryOf(ctype []byte, root bool) (string, bool) {
	if len(ctype) == 0 {
		return "", false
	}
	mtype, params, _, err := mediatype.Parse(string(ctype))
	multipart := strings.HasPrefix(strings.ToLower(mtype), "multipart/")
	if root && err == nil && !multipart {
		return "", false
	}
	if err != nil {
		// enmime refuses the part; measure it as a multipart anyway if it
		// names a boundary, to stay on the safe side.
		if b := looseBoundary(ctype); b != "" {
			return b, true
		}
		return "", false
	}
	if b := params["boundary"]; b != "" {
		return b, true
	}
	if root && multipart {
		return "", true
	}
	return "", false
}

// looseBoundary picks a boundary parameter out of a Content-Type value that
// does not parse.
func looseBoundary(ctype []byte) string {
	// ASCII-only lowering keeps the offsets of ctype: bytes.ToLower turns
	// an invalid UTF-8 byte into the 3-byte U+FFFD, shifting every index.
	lower := make([]byte, len(ctype))
	for j, c := range ctype {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[j] = c
	}
	i := bytes.Index(lower, []byte("boundary"))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(ctype[i+len("boundary"):], " \t")
	if len(rest) == 0 || rest[0] != '=' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	if len(rest) > 0 && rest[0] == '"' {
		if j := bytes.IndexByte(rest[1:], '"'); j >= 0 {
			return string(rest[1 : 1+j])
		}
		return string(rest[1:])
	}
	if j := bytes.IndexAny(rest, "; \t"); j >= 0 {
		rest = rest[:j]
	}
	return string(rest)
}
